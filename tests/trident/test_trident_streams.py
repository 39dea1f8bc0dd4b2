"""Trident additions on both engines: merge, join within a batch, new_values_stream, FilterNull,
and MemoryMapState on the Spark engine (its dict stays in the driver)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from squall import LocalCluster
from squall.trident import (
    BaseFilter,
    BaseFunction,
    Count,
    FilterNull,
    FixedBatchSpout,
    MemoryMapState,
    StateUpdater,
    Sum,
    TridentTopology,
    TridentTuple,
)
from tests.support.trident_helpers import FailFirstTime, Split, read_json_lines


def run(cluster_kwargs, topology):
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("trident", {}, topology)
        cluster.wait_idle(timeout_secs=300)
        return cluster.get_topology_stats("trident"), cluster.get_errors("trident")


class Times10(BaseFunction):
    def execute(self, t, c):
        c.emit([t[0] * 10])


class Even(BaseFilter):
    def is_keep(self, t):
        return t[0] % 2 == 0


class Upper(BaseFunction):
    def execute(self, t, c):
        c.emit([t[0].upper()])


class Copy(BaseFunction):
    def execute(self, t, c):
        c.emit([t[0]])


class NotWord(BaseFilter):
    def __init__(self, word):
        self.word = word

    def is_keep(self, t):
        return t[0] != self.word


class Record(BaseFilter):
    """Appends each tuple it sees to a JSON-lines file (works from Spark executors too)."""

    def __init__(self, path):
        self.path = path

    def is_keep(self, t):
        with open(self.path, "a") as f:
            f.write(json.dumps(list(t.values)) + "\n")
        return True


class NoneForShort(BaseFunction):
    """The word's length, None for words shorter than 3 letters."""

    def execute(self, t, c):
        c.emit([len(t[0]) if len(t[0]) >= 3 else None])


def test_merge_has_every_tuple_of_each_stream_in_one_batch(cluster_kwargs, engine):
    nums = [[n] for n in range(1, 11)]
    t = TridentTopology()
    s = t.new_stream("nums", FixedBatchSpout(["n"], 3, *nums))
    tens = s.each(["n"], Times10(), ["m"]).project(["m"])
    evens = s.filter(["n"], Even()).project(["n"])
    merged = t.merge(tens, evens)
    assert merged.fields == ["m"]  # named as the first stream
    counts = merged.group_by(["m"]).persistent_aggregate(MemoryMapState.factory("transactional"), Count(), ["c"])
    # within a batch the merged stream is one stream: a global sum per batch adds both parts
    sums = (t.merge(tens, evens).aggregate(["m"], Sum(), ["s"])
            .persistent_aggregate(MemoryMapState.factory("transactional"), ["s"], Sum(), ["total"]))
    _, errors = run(cluster_kwargs, t.build())
    assert errors == []
    expect = Counter([n * 10 for n in range(1, 11)] + [n for n in range(1, 11) if n % 2 == 0])
    keys = sorted(expect) + [3]
    assert counts.multi_get([[k] for k in keys]) == [expect[k] for k in keys[:-1]] + [None]
    assert expect[10] == 2  # 1 * 10 from one stream, 10 from the other
    assert sums.multi_get([[]]) == [sum(expect.elements())]


def test_join_is_inner_and_within_a_batch(cluster_kwargs, engine):
    # batches of two words: (a, a), (b, a), (c, b), (a, c)
    words = [["a"], ["a"], ["b"], ["a"], ["c"], ["b"], ["a"], ["c"]]
    t = TridentTopology()
    s = t.new_stream("words", FixedBatchSpout(["word"], 2, *words))
    left = s.each(["word"], Copy(), ["tag"])  # word, tag
    right = (s.filter(["word"], NotWord("c")).each(["word"], Upper(), ["upper"])
             .each(["word"], Copy(), ["w2"]).project(["upper", "w2"]))  # joined on w2: another name
    joined = t.join(left, ["word"], right, ["w2"], ["key", "tag", "upper"]).parallelism_hint(2)
    assert joined.fields == ["key", "tag", "upper"]
    counts = (joined.group_by(["key", "tag", "upper"])
              .persistent_aggregate(MemoryMapState.factory("opaque"), Count(), ["c"]))
    _, errors = run(cluster_kwargs, t.build())
    assert errors == []
    # a word n times in a batch joins n x n times; "c" is never on the right side (inner join)
    per_batch = [Counter(w[0] for w in words[i:i + 2]) for i in range(0, len(words), 2)]
    expect = Counter()
    for batch in per_batch:
        for w, n in batch.items():
            if w != "c":
                expect[w] += n * n
    assert expect == {"a": 4 + 1 + 1, "b": 1 + 1}  # not 4 x 4: tuples of different batches never join
    got = counts.multi_get([[w, w, w.upper()] for w in "abc"])
    assert got == [expect["a"], expect["b"], None]


def test_new_values_stream_gives_each_commit_key_and_new_value(cluster_kwargs, engine, tmp_path):
    sentences = [["the cow the moon"], ["the man"], ["a cow"], ["the end"]]
    out = tmp_path / "new-values.jsonl"
    t = TridentTopology()
    counts = (t.new_stream("s", FixedBatchSpout(["sentence"], 2, *sentences))
              .each(["sentence"], Split(), ["word"])
              .group_by(["word"])
              .persistent_aggregate(MemoryMapState.factory("transactional"), Count(), ["count"])
              .parallelism_hint(2))
    counts.new_values_stream().filter(["word", "count"], Record(str(out)))
    _, errors = run(cluster_kwargs, t.build())
    assert errors == []
    # batch 1 = sentences 1-2: the 3, cow 1, moon 1, man 1; batch 2: a 1, cow 2, the 4, end 1
    assert sorted(map(tuple, read_json_lines(out))) == sorted([
        ("the", 3), ("cow", 1), ("moon", 1), ("man", 1), ("a", 1), ("cow", 2), ("the", 4), ("end", 1)])
    assert counts.multi_get([["the"], ["cow"]]) == [4, 2]


def test_new_values_failing_downstream_retries_the_commit_and_emits_the_same_values(cluster_kwargs, engine,
                                                                                   tmp_path):
    out = tmp_path / "new-values.jsonl"
    t = TridentTopology()
    counts = (t.new_stream("s", FixedBatchSpout(["sentence"], 1, ["x y"], ["y z"], ["z z"]))
              .each(["sentence"], Split(), ["word"])
              .group_by(["word"])
              .persistent_aggregate(MemoryMapState.factory("transactional"), Count(), ["count"]))
    (counts.new_values_stream()
     .each(["word"], FailFirstTime(str(tmp_path / "failed-once"), "z"), ["w"])
     .filter(["w", "count"], Record(str(out))))
    stats, errors = run(cluster_kwargs, t.build())
    assert [e.error for e in errors] == ["RuntimeError: first attempt fails on 'z'"]
    # the commit of batch 2 (y 2, z 1) failed downstream once and was retried: the state did not
    # count twice, and z's new value reached the end once, the same value
    assert counts.multi_get([["x"], ["y"], ["z"]]) == [1, 2, 3]
    records = [tuple(r) for r in read_json_lines(out)]
    assert [r for r in records if r[0] == "z"] == [("z", 1), ("z", 3)]
    assert set(records) == {("x", 1), ("y", 1), ("y", 2), ("z", 1), ("z", 3)}


class PutLength(StateUpdater):
    """partition_persist: stores each word's length and emits (word, length) as its new values."""

    def update_state(self, state, tuples, collector):
        state.multi_put([[t[0]] for t in tuples], [len(t[0]) for t in tuples])
        for t in tuples:
            collector.emit([t[0], len(t[0])])


def test_new_values_of_partition_persist_are_what_its_updater_emits(cluster_kwargs, engine, tmp_path):
    out = tmp_path / "new-values.jsonl"
    t = TridentTopology()
    state = (t.new_stream("s", FixedBatchSpout(["sentence"], 1, ["ab cde"], ["f"]))
             .each(["sentence"], Split(), ["word"])
             .partition_persist(MemoryMapState.factory("non-transactional"), ["word"], PutLength(), ["w", "n"]))
    state.new_values_stream().filter(["w", "n"], Record(str(out)))
    _, errors = run(cluster_kwargs, t.build())
    assert errors == []
    assert sorted(map(tuple, read_json_lines(out))) == [("ab", 2), ("cde", 3), ("f", 1)]
    assert state.multi_get([["cde"], ["zz"]]) == [3, None]


def test_filter_null(cluster_kwargs, engine):
    t = TridentTopology()
    lengths = (t.new_stream("s", FixedBatchSpout(["sentence"], 2, ["an apple a day"], ["is ok"], ["tree"]))
               .each(["sentence"], Split(), ["word"])
               .each(["word"], NoneForShort(), ["len"])
               .each(["len"], FilterNull())
               .group_by(["word"])
               .persistent_aggregate(MemoryMapState.factory("transactional"), ["len"], Sum(), ["total"]))
    _, errors = run(cluster_kwargs, t.build())
    assert errors == []
    assert lengths.multi_get([["apple"], ["day"], ["tree"], ["an"], ["a"], ["is"]]) == [5, 3, 4, None, None, None]


def test_filter_null_checks_every_input_field():
    f = FilterNull()
    assert f.is_keep(TridentTuple([1, "x"], ("a", "b")))
    assert not f.is_keep(TridentTuple([1, None], ("a", "b")))
    assert not f.is_keep(TridentTuple([None], ("a",)))
    assert f.is_keep(TridentTuple([0, "", False], ("a", "b", "c")))  # falsy is not null


@pytest.mark.parametrize("kind", ["transactional", "opaque", "non-transactional"])
def test_memory_state_on_every_engine_with_a_replayed_batch(cluster_kwargs, engine, kind, tmp_path):
    sentences = [["the cow jumped over the moon"], ["the man went to the store"], ["candy for the cow"]]
    t = TridentTopology()
    factory = MemoryMapState.factory(kind)
    counts = (t.new_stream("s", FixedBatchSpout(["sentence"], 1, *sentences))
              .each(["sentence"], Split(), ["word"]).parallelism_hint(2)
              .each(["word"], FailFirstTime(str(tmp_path / "failed-once"), "candy"), ["w"])
              .group_by(["w"])
              .persistent_aggregate(factory, Count(), ["count"]).parallelism_hint(2))
    stats, errors = run(cluster_kwargs, t.build())
    assert [e.error for e in errors] == ["RuntimeError: first attempt fails on 'candy'"]
    truth = Counter(w for s in sentences for w in s[0].split())
    words = sorted(truth)
    assert counts.multi_get([[w] for w in words]) == [truth[w] for w in words]
    assert sorted((k[0], v) for k, v in factory.items()) == sorted(truth.items())  # the driver holds them



class LengthOrReport(BaseFunction):
    """The word's length; a word with a digit is reported (report_error) and emits nothing.
    `prepare` and `cleanup` are logged to a file (they run in the slots on Spark)."""

    def __init__(self, log):
        self.log = log

    def _note(self, what):
        with open(self.log, "a") as f:
            f.write(what + "\n")

    def prepare(self, conf, context):
        self._note("prepare")

    def execute(self, t, c):
        if any(ch.isdigit() for ch in t[0]):
            c.report_error(f"not a word: {t[0]!r}")
            return
        c.emit([len(t[0])])

    def cleanup(self):
        self._note("cleanup")


def test_an_operation_reports_errors_and_is_cleaned_up(cluster_kwargs, engine, tmp_path):
    """As Storm: `TridentCollector.report_error` records the error and the batch goes on (the
    other words are counted), and every prepared operation's `cleanup` runs at shutdown."""
    log = tmp_path / "calls"
    t = TridentTopology()
    lengths = (t.new_stream("s", FixedBatchSpout(["sentence"], 2, ["an apple r2d2"], ["tree"], ["c3po day"]))
               .each(["sentence"], Split(), ["word"])
               .each(["word"], LengthOrReport(str(log)), ["len"])
               .group_by(["word"])
               .persistent_aggregate(MemoryMapState.factory("transactional"), ["len"], Sum(), ["total"]))
    _, errors = run(cluster_kwargs, t.build())
    assert sorted(e.error for e in errors) == ["not a word: 'c3po'", "not a word: 'r2d2'"]
    assert {e.kind for e in errors} == {"reported"}
    assert lengths.multi_get([["an"], ["apple"], ["tree"], ["day"], ["r2d2"]]) == [2, 5, 4, 3, None]
    calls = log.read_text().splitlines()
    assert calls.count("prepare") >= 1 and calls.count("cleanup") == calls.count("prepare"), calls
