"""Trident on both engines: word count into state, replays with the same txid, operations,
the exactly-once guarantee table."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from squall import LocalCluster
from squall.trident import (
    BaseAggregator,
    BaseFilter,
    BaseFunction,
    Count,
    FixedBatchSpout,
    JsonLinesFileSpout,
    MapGet,
    MemoryMapState,
    NonTransactionalSpout,
    SQLiteMapState,
    StateUpdater,
    Sum,
    TridentTopology,
)
from tests.support.trident_helpers import (
    FailFirstTime,
    HookedStateFactory,
    RecordingBatchSpout,
    RecordingState,
    ShiftingOpaqueSpout,
    Split,
    read_json_lines,
    write_corpus,
)

SENTENCES = [["the cow jumped over the moon"], ["the man went to the store and bought some candy"],
             ["four score and seven years ago"], ["how many apples can you eat"], ["to be or not to be the person"]]
TRUTH = Counter(w for s in SENTENCES for w in s[0].split())


def factory_for(engine, kind, tmp_path, name="state"):
    if engine == "local":
        return MemoryMapState.factory(kind)
    return SQLiteMapState.factory(str(tmp_path / f"{name}.db"), kind)


def run(cluster_kwargs, topology, conf=None):
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("trident", conf or {}, topology)
        cluster.wait_idle(timeout_secs=300)
        return cluster.get_topology_stats("trident"), cluster.get_errors("trident")


@pytest.mark.parametrize("kind", ["transactional", "opaque", "non-transactional"])
def test_word_count_persistent_aggregate(cluster_kwargs, engine, kind, tmp_path):
    t = TridentTopology()
    factory = factory_for(engine, kind, tmp_path)
    counts = (t.new_stream("sentences", FixedBatchSpout(["sentence"], 2, *SENTENCES))
              .each(["sentence"], Split(), ["word"]).parallelism_hint(2)
              .group_by(["word"])
              .persistent_aggregate(factory, Count(), ["count"]).parallelism_hint(2))
    stats, errors = run(cluster_kwargs, t.build())
    assert errors == []
    words = sorted(TRUTH)
    assert counts.multi_get([[w] for w in words]) == [TRUTH[w] for w in words]
    assert counts.multi_get([["absent"]]) == [None]
    # combiner partials: the state tasks got fewer data tuples than there are words (words repeat
    # within a sentence, so some are combined before the shuffle); 3 batches x 2 tasks commit tuples
    state = [c for c in stats if "-state" in c][0]
    assert stats[state]["executed"] - 3 * 2 < sum(TRUTH.values())


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_failed_batch_is_replayed_with_same_txid_and_counts_are_exact(cluster_kwargs, engine, kind, tmp_path):
    emitted, committed = tmp_path / "emitted.jsonl", tmp_path / "committed.jsonl"
    t = TridentTopology()
    factory = HookedStateFactory(factory_for(engine, kind, tmp_path), RecordingState, log_path=str(committed))
    counts = (t.new_stream("sentences", RecordingBatchSpout(str(emitted), ["sentence"], 2, *SENTENCES))
              .each(["sentence"], Split(), ["word"])
              .each(["word"], FailFirstTime(str(tmp_path / "failed-once"), "candy"), ["checked"])
              .group_by(["checked"])
              .persistent_aggregate(factory, Count(), ["count"]).parallelism_hint(3))
    stats, errors = run(cluster_kwargs, t.build())
    assert (tmp_path / "failed-once").exists()
    assert [e.error for e in errors] == ["RuntimeError: first attempt fails on 'candy'"]
    assert stats["sentences"]["failed"] == 1  # the batch with "candy" failed once, then was replayed
    # the batch holding "candy" was emitted twice (the failed attempt, then the replay) with one txid ...
    candy = [b["txid"] for b in read_json_lines(emitted) if any("candy" in r[0] for r in b["rows"])]
    assert len(candy) == 2 and candy[0] == candy[1], candy
    # ... which every state partition committed exactly once, the partition holding "candy" with it
    commits = read_json_lines(committed)
    assert sorted((c["partition"], c["txid"]) for c in commits) == [(p, x) for p in range(3) for x in (1, 2, 3)]
    assert [c["txid"] for c in commits if ["candy"] in c["keys"]] == candy[:1]
    words = sorted(TRUTH)
    assert counts.multi_get([[w] for w in words]) == [TRUTH[w] for w in words]


def test_state_stores_txids(tmp_path):
    t = TridentTopology()
    factory = MemoryMapState.factory("transactional")
    t.new_stream("s", FixedBatchSpout(["sentence"], 2, *SENTENCES)).each(["sentence"], Split(), ["word"]) \
        .group_by(["word"]).persistent_aggregate(factory, Count(), ["count"])
    run({"engine": "local"}, t.build())
    from squall.trident.state.memory import _db

    db = _db(factory.db_id)
    stored = {k: db.data[k] for k in db.data}
    stored = {tuple(__import__("json").loads(k)): v for k, v in stored.items()}
    # "the" is in batches 1 (sentences 1-2) and 3 (sentence 5): last written by txid 3
    assert stored[("the",)].txid == 3 and stored[("the",)].val == 5
    assert stored[("cow",)].txid == 1


class Even(BaseFilter):
    def is_keep(self, t):
        return t[0] % 2 == 0


class Double(BaseFunction):
    def execute(self, t, c):
        c.emit([t[0] * 2])


class MinMax(BaseAggregator):
    def init(self, batch_id, collector):
        return [None, None]

    def aggregate(self, state, t, collector):
        v = t[0]
        state[0] = v if state[0] is None else min(state[0], v)
        state[1] = v if state[1] is None else max(state[1], v)

    def complete(self, state, collector):
        collector.emit(state)


class Collect(StateUpdater):
    """partition_persist: writes each tuple's value under its key (non-transactional)."""

    def update_state(self, state, tuples, collector):
        state.multi_put([[t[0]] for t in tuples], [t[1] for t in tuples])


def test_operations(cluster_kwargs, engine, tmp_path):
    nums = [[i, f"k{i % 3}"] for i in range(1, 13)]
    t = TridentTopology()
    s = t.new_stream("nums", FixedBatchSpout(["n", "k"], 6, *nums))  # two batches: 1..6, 7..12
    sums = (s.filter(["n"], Even()).each(["n"], Double(), ["d"]).project(["k", "d"])
            .group_by(["k"]).persistent_aggregate(factory_for(engine, "opaque", tmp_path, "sums"), ["d"], Sum(),
                                                  ["sum"]))
    minmax = (s.aggregate(["n"], MinMax(), ["lo", "hi"])
              .each(["lo", "hi"], _Pair(), ["pair"])
              .persistent_aggregate(factory_for(engine, "transactional", tmp_path, "mm"), ["pair"], _Last(), ["mm"]))
    per_part = (s.partition_aggregate(["n"], Count(), ["c"])
                .persistent_aggregate(factory_for(engine, "opaque", tmp_path, "pc"), ["c"], Sum(), ["total"]))
    persisted = s.partition_persist(factory_for(engine, "non-transactional", tmp_path, "pp"), ["k", "n"], Collect())
    queried = (s.each(["n"], _AsKey(), ["key"]).state_query(sums, ["key"], MapGet(), ["current"])
               .each(["current"], _NoneAsZero(), ["seen"])
               .persistent_aggregate(factory_for(engine, "non-transactional", tmp_path, "q"), ["seen"], Sum(),
                                     ["total"]))
    stats, errors = run(cluster_kwargs, t.build())
    assert errors == []
    # even numbers doubled, summed per k: k0: 6,12 -> 12+24; k1: 4,10 -> 8+20; k2: 2,8 -> 4+16
    assert sums.multi_get([["k0"], ["k1"], ["k2"]]) == [36, 28, 20]
    assert minmax.multi_get([[]]) == [[7, 12]]  # the last batch's
    assert per_part.multi_get([[]]) == [12]
    assert persisted.multi_get([["k0"], ["k1"], ["k2"]]) == [12, 10, 11]  # last value written per key
    # a query reads the state as committed before its batch: batch 1 finds nothing (0 each); batch
    # 2 finds batch 1's sums k0: 12, k1: 8, k2: 4, twice each (7..12 has each key twice)
    assert queried.multi_get([[]]) == [2 * (12 + 8 + 4)]


class _Pair(BaseFunction):
    def execute(self, t, c):
        c.emit([[t[0], t[1]]])


class _NoneAsZero(BaseFunction):
    def execute(self, t, c):
        c.emit([0 if t[0] is None else t[0]])


class _AsKey(BaseFunction):
    def execute(self, t, c):
        c.emit([f"k{t[0] % 3}"])


class _Last:
    """A ReducerAggregator keeping the last value."""

    def init(self):
        return None

    def reduce(self, curr, t):
        return t[0]


def test_file_spout_reads_batches_by_offsets(cluster_kwargs, engine, tmp_path):
    truth = write_corpus(str(tmp_path / "in"), files=3, lines=40)
    t = TridentTopology()
    counts = (t.new_stream("files", JsonLinesFileSpout(str(tmp_path / "in"), ["sentence"], batch_size=25))
              .each(["sentence"], Split(), ["word"]).group_by(["word"])
              .persistent_aggregate(SQLiteMapState.factory(str(tmp_path / "wc.db"), "transactional"), Count(),
                                    ["count"]))
    stats, errors = run(cluster_kwargs, t.build())
    assert errors == []
    words = sorted(truth)
    assert counts.multi_get([[w] for w in words]) == [truth[w] for w in words]
    assert stats["files"]["acked"] == 2 * 5  # 120 lines in batches of 25: 5 batches, each processed + committed


def test_opaque_spout_with_changing_batches(cluster_kwargs, engine, tmp_path):
    truth = write_corpus(str(tmp_path / "in"), files=2, lines=60)
    t = TridentTopology()
    counts = (t.new_stream("opaque", ShiftingOpaqueSpout(str(tmp_path / "in"), max_batch=40))
              .each(["sentence"], Split(), ["word"])
              .each(["word"], FailFirstTime(str(tmp_path / "failed-once"), "kiwi"), ["w"])
              .group_by(["w"])
              .persistent_aggregate(factory_for(engine, "opaque", tmp_path), Count(), ["count"]))
    _, errors = run(cluster_kwargs, t.build())
    assert [e.error for e in errors] == ["RuntimeError: first attempt fails on 'kiwi'"]  # a batch was replayed
    words = sorted(truth)
    assert counts.multi_get([[w] for w in words]) == [truth[w] for w in words]


class Ticks(NonTransactionalSpout):
    def get_output_fields(self):
        return ["n"]

    def next_batch(self, txid):
        return [[txid]] if txid <= 3 else None


@pytest.mark.parametrize("spout_kind,state_kind,expect", [
    ("transactional", "opaque", None),
    ("transactional", "transactional", None),
    ("transactional", "non-transactional", "at-least-once"),
    ("opaque", "transactional", "neither exactly-once nor at-least-once"),
    ("non-transactional", "opaque", "at-most-once"),
])
def test_guarantee_warning(caplog, spout_kind, state_kind, expect, tmp_path):
    spout = {"transactional": FixedBatchSpout(["n"], 1, [1]), "opaque": ShiftingOpaqueSpout(str(tmp_path)),
             "non-transactional": Ticks()}[spout_kind]
    t = TridentTopology()
    t.new_stream("s", spout).persistent_aggregate(MemoryMapState.factory(state_kind), Count(), ["c"])
    with caplog.at_level(logging.WARNING, logger="squall.trident"):
        t.build()
    msgs = [r.getMessage() for r in caplog.records]
    if expect is None:
        assert msgs == []
    else:
        assert len(msgs) == 1 and expect in msgs[0] and spout_kind in msgs[0] and state_kind in msgs[0]


def test_bad_stream_definitions():
    t = TridentTopology()
    s = t.new_stream("s", FixedBatchSpout(["sentence"], 1, ["a"]))
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['nope'\]"):
        s.each(["nope"], Split(), ["w"])
    with pytest.raises(ValueError, match="already exist"):
        s.each(["sentence"], Split(), ["sentence"])
    with pytest.raises(TypeError, match="CombinerAggregator"):
        s.persistent_aggregate(MemoryMapState.factory("opaque"), object(), ["x"])
