"""Several ackers: ack messages are partitioned by `root % ackers` (on Spark, a shuffle to an
acker stage that folds them) and every tree's verdict is the same as with one acker."""

from __future__ import annotations

import pytest

from squall import BasicBolt, Bolt, Config, Spout, TopologyBuilder
from squall.testing import complete_topology

N = 60


class Sentences(Spout):  # replaced by complete_topology's mocked tuples
    def declare_output_fields(self, d):
        d.declare(["sentence"])


class Split(BasicBolt):
    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute(self, t, collector):
        for w in t["sentence"].split():
            collector.emit([w])


class FailOdd(Bolt):
    """Fails the first word of every odd sentence (it starts with 'odd'), acks the rest."""

    def declare_output_fields(self, d):
        pass

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, t):
        w = t["word"]
        if w.startswith("odd"):
            self.collector.fail(t)
        else:
            self.collector.ack(t)


@pytest.mark.parametrize("ackers", [1, 3])
def test_verdicts_do_not_depend_on_the_number_of_ackers(cluster_kwargs, ackers):
    b = TopologyBuilder()
    b.set_spout("sentences", Sentences())
    b.set_bolt("split", Split(), parallelism=2).shuffle_grouping("sentences")
    b.set_bolt("check", FailOdd(), parallelism=3).fields_grouping("split", ["word"])
    sentences = [[f"{'odd' if i % 2 else 'even'}{i} a b c"] for i in range(N)]
    result = complete_topology(b.create_topology(), mocked_sources={"sentences": sentences},
                               conf=Config({Config.TOPOLOGY_ACKER_EXECUTORS: ackers}), **cluster_kwargs)
    assert result.acked("sentences") == list(range(0, N, 2))
    assert result.failed("sentences") == list(range(1, N, 2))
