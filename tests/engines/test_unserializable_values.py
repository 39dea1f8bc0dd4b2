"""A value that cannot cross a task boundary (here a generator) fails only the tuple that
carries it, on both engines alike, with an error that names where it came from; the wave and
its other trees go on."""

from __future__ import annotations

from squall import BasicBolt, Bolt, LocalCluster, Spout, TopologyBuilder
from squall.testing import complete_topology

N = 20
BAD = 13


class Split(BasicBolt):
    def declare_output_fields(self, d):
        d.declare(["word", "extra"])

    def execute(self, t, collector):
        for w in t["sentence"].split():
            extra = (c for c in w) if w == f"w{BAD}" else len(w)  # one word carries a generator
            collector.emit([w, extra])


class Count(BasicBolt):
    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute(self, t, collector):
        collector.emit([t["word"]])


class Sentences(Spout):  # replaced by complete_topology's mocked tuples
    def declare_output_fields(self, d):
        d.declare(["sentence"])


def wordcount():
    b = TopologyBuilder()
    b.set_spout("sentences", Sentences())
    b.set_bolt("split", Split(), parallelism=2).shuffle_grouping("sentences")
    b.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
    return b.create_topology()


def test_only_the_tuple_carrying_the_value_fails(cluster_kwargs):
    sentences = [[f"w{i} common"] for i in range(N)]
    result = complete_topology(wordcount(), mocked_sources={"sentences": sentences}, **cluster_kwargs)
    assert result.failed("sentences") == [BAD]
    assert result.acked("sentences") == [i for i in range(N) if i != BAD]
    words = sorted(v[0] for v in result.emitted("count"))
    assert words == sorted([f"w{i}" for i in range(N) if i != BAD] + ["common"] * N)
    errors = [e for e in result.errors if "UnserializableValue" in e.error]
    assert len(errors) == 1, result.errors
    e = errors[0]
    assert e.component == "split" and e.task in (4, 5)  # task ids: count 1-2, sentences 3, split 4-5
    assert "'extra'" in e.error and "generator" in e.error and "stream 'default'" in e.error
    assert e.values == f"['w{BAD}']"  # the tuple's other values
    assert not [e for e in result.errors if e.kind == "lost"]  # no wave was lost


class GeneratorSpout(Spout):
    def declare_output_fields(self, d):
        d.declare(["n", "payload"])

    def open(self, conf, context, collector):
        self.collector, self.i, self.acked, self.failed = collector, 0, [], []

    def next_tuple(self):
        if self.i < N:
            payload = (x for x in "ab") if self.i == BAD else "ok"
            self.collector.emit([self.i, payload], msg_id=self.i)
            self.i += 1

    def ack(self, msg_id):
        self.acked.append(msg_id)

    def fail(self, msg_id, reason=None):
        self.failed.append((msg_id, reason.kind if reason else None))


class Sink(Bolt):
    def declare_output_fields(self, d):
        pass

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, t):
        self.collector.ack(t)


def test_a_spout_value_that_cannot_cross_fails_its_msg_id_at_once(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("gen", GeneratorSpout())
    b.set_bolt("sink", Sink(), parallelism=2).shuffle_grouping("gen")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", {}, b.create_topology())
        cluster.advance_time(1)
        spout = cluster.spout_instances("t")[0]
        assert spout.failed == [(BAD, "error")]
        assert sorted(spout.acked) == [i for i in range(N) if i != BAD]
        errors = cluster.get_errors("t")
        assert [(e.component, e.kind) for e in errors] == [("gen", "error")]
        assert "'payload'" in errors[0].error and "generator" in errors[0].error
        assert cluster.get_topology_stats("t")["gen"]["failed"] == 1


class CyclicEmitter(BasicBolt):
    """Emits, per word, a value that holds itself: batches are pickled without the memo first,
    which cannot write a cycle; such a batch must still cross, whole."""

    def declare_output_fields(self, d):
        d.declare(["word", "node"])

    def execute(self, t, collector):
        for w in t["sentence"].split():
            node = {"name": w}
            node["self"] = node
            collector.emit([w, node])


class CheckCycle(BasicBolt):
    def declare_output_fields(self, d):
        d.declare(["word", "cycle_intact"])

    def execute(self, t, collector):
        node = t["node"]
        collector.emit([t["word"], node["self"] is node and node["name"] == t["word"]])


def test_a_value_holding_itself_crosses_whole(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("sentences", Sentences())
    b.set_bolt("split", CyclicEmitter(), parallelism=2).shuffle_grouping("sentences")
    b.set_bolt("check", CheckCycle(), parallelism=2).fields_grouping("split", ["word"])
    sentences = [[f"w{i} common"] for i in range(N)]
    result = complete_topology(b.create_topology(), mocked_sources={"sentences": sentences}, **cluster_kwargs)
    assert result.acked("sentences") == list(range(N)) and not result.errors
    got = sorted(result.emitted("check"))
    assert got == sorted([[f"w{i}", True] for i in range(N)] + [["common", True]] * N)
