"""Streams of different Trident spouts in one topology, as in Storm: every spout takes part in the
same batches (one txid), so a merge of two spouts' streams into one state is exact and a join sees
both spouts' tuples of the same txid; both engines."""

from __future__ import annotations

from collections import Counter

from squall import LocalCluster
from squall.trident import (
    BaseFunction,
    Count,
    FixedBatchSpout,
    MemoryMapState,
    NonTransactionalSpout,
    TridentTopology,
)


class Split(BaseFunction):
    def execute(self, t, collector):
        for w in t[0].split():
            collector.emit([w])


class FailOnce(BaseFunction):
    """Raises the first time it meets `word` (the batch fails and is replayed with the same txid)."""

    def __init__(self, word):
        self.word, self.failed = word, [False]

    def execute(self, t, collector):
        if t[0] == self.word and not self.failed[0]:
            self.failed[0] = True
            raise RuntimeError(f"first meeting with {self.word!r}")
        collector.emit([t[0]])


SENTENCES = [["the cat"], ["the dog"], ["a cat ran"], ["dogs ran far"], ["the end"]]
LINES = [["cat cat"], ["far away"], ["the"]]


def merged_counts(engine_kwargs, fail_word=None) -> tuple[dict, Counter, list[str]]:
    t = TridentTopology()
    a = t.new_stream("sentences", FixedBatchSpout(["sentence"], 2, *SENTENCES)).each(["sentence"], Split(), ["word"])
    b = t.new_stream("lines", FixedBatchSpout(["line"], 1, *LINES)).each(["line"], Split(), ["w"])
    words = t.merge(a.project(["word"]), b.project(["w"]))
    if fail_word is not None:
        words = words.each(["word"], FailOnce(fail_word), ["checked"]).project(["checked"])
    state = words.group_by([words.fields[-1]]).persistent_aggregate(
        MemoryMapState.factory("transactional"), Count(), ["count"])
    truth = Counter(w for rows in (SENTENCES, LINES) for r in rows for w in r[0].split())
    with LocalCluster(simulated_time=True, stepped=True, **engine_kwargs) as cluster:
        cluster.submit_topology("merged", {}, t.build())
        cluster.wait_idle(300)
        (coordinator,) = cluster.spout_instances("merged")
        keys = sorted(truth)
        got = dict(zip(keys, state.multi_get([[k] for k in keys]), strict=True))
        assert coordinator.committed == 3  # max(5 sentences / 2, 3 lines / 1) batches: one txid for both
        errors = [e.error for e in cluster.get_errors("merged")]
    return got, truth, errors


def test_two_spouts_merged_into_one_count_are_exact(cluster_kwargs):
    got, truth, errors = merged_counts(cluster_kwargs)
    assert got == dict(truth) and errors == []


def test_a_failed_batch_replays_both_spouts_parts_with_the_same_txid(cluster_kwargs):
    got, truth, errors = merged_counts(cluster_kwargs, fail_word="far")
    assert got == dict(truth)
    assert len(errors) == 1 and "first meeting with 'far'" in errors[0]


def test_a_join_of_two_spouts_meets_tuples_of_the_same_batch(cluster_kwargs):
    t = TridentTopology()
    left = t.new_stream("left", FixedBatchSpout(["k", "v"], 2, ["a", 1], ["b", 2], ["a", 3], ["c", 4]))
    right = t.new_stream("right", FixedBatchSpout(["key", "w"], 2, ["a", 10], ["a", 11], ["c", 12], ["b", 13]))
    joined = t.join(left, ["k"], right, ["key"], ["k", "v", "w"])
    pairs = joined.group_by(["k"]).persistent_aggregate(MemoryMapState.factory("transactional"), Count(), ["n"])
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("joined", {}, t.build())
        cluster.wait_idle(300)
        got = pairs.multi_get([["a"], ["b"], ["c"]])
    # txid 1: a(1) meets a(10) and a(11); txid 2: c(4) meets c(12); b is in txid 1 on the left and 2 on the right
    assert got == [2, None, 1]


class Numbers(NonTransactionalSpout):
    def __init__(self, n):
        self.n = n

    def get_output_fields(self):
        return ["x"]

    def next_batch(self, txid):
        return [[str(txid)]] if txid <= self.n else None


def test_spouts_of_every_kind_share_the_txids(cluster_kwargs):
    t = TridentTopology()
    a = t.new_stream("fixed", FixedBatchSpout(["word"], 1, ["p"], ["q"]))
    b = t.new_stream("numbers", Numbers(4))
    state = t.merge(a, b).group_by(["word"]).persistent_aggregate(MemoryMapState.factory("transactional"), Count(),
                                                                  ["count"])
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("kinds", {}, t.build())
        cluster.wait_idle(300)
        (coordinator,) = cluster.spout_instances("kinds")
        assert coordinator.committed == 4
        assert state.multi_get([["p"], ["q"], ["1"], ["4"]]) == [1, 1, 1, 1]
