"""DRPC over Trident on both engines: the Trident tutorial's word count (MemoryMapState) and its
DRPC query (examples/trident_drpc.py), and what bad input and misuse get."""

from __future__ import annotations

import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from examples.trident_drpc import SENTENCES, Split, build
from squall import LocalCluster
from squall.trident import (
    BaseFunction,
    Count,
    DRPCExecutionException,
    FixedBatchSpout,
    LocalDRPC,
    MemoryMapState,
    TridentTopology,
)

TRUTH = Counter(w for s in SENTENCES for w in s[0].split())


def expected(query: str) -> str:
    """The tutorial's answer, computed here: the sum of the known words' counts (as Storm's JSON)."""
    return json.dumps([[sum(TRUTH[w] for w in query.split() if w in TRUTH)]])


@pytest.fixture
def drpc():
    d = LocalDRPC()
    yield d
    d.shutdown()


def test_tutorial_word_count_and_drpc_query(cluster_kwargs, engine, drpc):
    topology, word_counts = build(drpc)
    queries = ["cat the dog jumped", "the man", "the the", "four score and seven years ago", "nothing known here"]
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("tutorial", {}, topology)
        cluster.wait_idle(timeout_secs=300)
        answers = [drpc.execute("words", q) for q in queries]
        errors = cluster.get_errors("tutorial")
    assert errors == []
    assert answers == [expected(q) for q in queries]
    assert answers[0] == "[[6]]" and answers[2] == "[[10]]"  # "the" is 5, and counted per word of the query
    assert answers[-1] == "[[0]]"  # as Storm: a global Sum of no tuples is its zero
    words = sorted(TRUTH)
    assert word_counts.multi_get([[w] for w in words]) == [TRUTH[w] for w in words]


def test_concurrent_requests_each_get_their_own_answer(cluster_kwargs, engine, drpc):
    """One request per batch: the Sum of one request never includes another's words."""
    topology, _ = build(drpc)
    words = sorted(TRUTH)
    queries = [" ".join(words[i:i + 1 + i % 4]) for i in range(0, 24, 2)]
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("tutorial", {}, topology)
        cluster.wait_idle(timeout_secs=300)
        with ThreadPoolExecutor(len(queries)) as pool:
            answers = list(pool.map(lambda q: drpc.execute("words", q, timeout_secs=300), queries))
    assert answers == [expected(q) for q in queries]
    assert len(set(answers)) > 3  # the queries differ, and so do their answers


class Explode(BaseFunction):
    def execute(self, t, c):
        if t[0] == "boom":
            raise RuntimeError("cannot split 'boom'")
        for w in t[0].split():
            c.emit([w])


class AsSet(BaseFunction):
    def execute(self, t, c):
        c.emit([set(t[0])])


def _serving(drpc: LocalDRPC) -> TridentTopology:
    t = TridentTopology()
    t.new_drpc_stream("lengths", drpc).each(["args"], Explode(), ["word"]).project(["word"])
    t.new_drpc_stream("sets", drpc).each(["args"], AsSet(), ["letters"]).project(["letters"])
    return t


def test_drpc_bad_input_fails_only_that_request(cluster_kwargs, engine, drpc):
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("drpc", {}, _serving(drpc).build())
        with pytest.raises(DRPCExecutionException, match=r"no DRPC function 'nope'.*\['lengths', 'sets'\]"):
            drpc.execute("nope", "a b")
        with pytest.raises(TypeError, match="one string"):
            drpc.execute("lengths", 42)
        with pytest.raises(DRPCExecutionException, match=r"lengths\('boom'\) failed: .*cannot split 'boom'"):
            drpc.execute("lengths", "boom")
        with pytest.raises(DRPCExecutionException, match=r"sets\('ab'\) failed: .*not JSON.*set"):
            drpc.execute("sets", "ab")
        assert drpc.execute("lengths", "a bb") == '[["a"],["bb"]]'  # the topology goes on
        assert drpc.execute("lengths", "") == "[]"  # no tuple reached the end
        errors = [e.error for e in cluster.get_errors("drpc")]
        cluster.kill_topology("drpc")
    assert any("cannot split 'boom'" in e for e in errors) and any("not JSON" in e for e in errors)
    with pytest.raises(DRPCExecutionException, match="no DRPC function 'lengths'"):
        drpc.execute("lengths", "a")  # nothing serves it once its topology is killed


def test_tutorial_drpc_answers_in_simulated_time_without_advancing_it(cluster_kwargs, engine, drpc):
    """As in Storm's simulated-time cluster, only the clock is simulated: the topology runs, so a DRPC
    request is answered though the caller never advances time."""
    topology, word_counts = build(drpc)
    words = sorted(TRUTH)
    with LocalCluster(simulated_time=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("tutorial", {}, topology)
        deadline = time.monotonic() + 300  # a hang guard: the test waits for the counts, counted
        while word_counts.multi_get([[w] for w in words]) != [TRUTH[w] for w in words]:
            assert time.monotonic() < deadline, "the word count did not run on its own"
            time.sleep(0.05)
        answers = [drpc.execute("words", q, timeout_secs=300) for q in ("cat the dog jumped", "the man")]
        assert cluster.clock.now() == 0  # the clock never moved
    assert answers == [expected("cat the dog jumped"), expected("the man")]


def test_drpc_request_without_a_running_wave_loop_times_out_clearly(drpc):
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology("drpc", {}, _serving(drpc).build())
        with pytest.raises(DRPCExecutionException, match="got no answer.*stepped=True"):
            drpc.execute("lengths", "a", timeout_secs=0.2)
        cluster.wait_idle()  # the request was withdrawn: nothing is left to run
        assert cluster.spout_instances("drpc", "drpc-lengths")[0].idle


def test_bad_stream_definitions_are_refused_at_once(drpc):
    t = TridentTopology()
    a = t.new_stream("a", FixedBatchSpout(["x"], 1, [1]))
    b = t.new_stream("b", FixedBatchSpout(["y", "z"], 1, [1, 2]))
    requests = t.new_drpc_stream("g", drpc)
    with pytest.raises(ValueError, match="a DRPC stream runs one request per batch"):
        t.merge(a, requests)
    with pytest.raises(ValueError, match="1 fields like the first"):
        t.merge(b.project(["y"]), b)
    with pytest.raises(ValueError, match="same stream is given twice"):
        t.merge(a, a)
    with pytest.raises(ValueError, match="at least two"):
        t.merge(a)
    with pytest.raises(TypeError, match="Trident streams"):
        t.merge(a, "b")
    with pytest.raises(ValueError, match=r"2 distinct output fields.*\['z'\]"):
        t.join(b, ["y"], b.project(["y"]), ["y"], ["y"])
    with pytest.raises(ValueError, match="as many join fields"):
        t.join(b, ["y", "z"], b.project(["y"]), ["y"], ["y", "z"])
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['q'\]"):
        t.join(b, ["q"], b.project(["y"]), ["y"], ["y", "z"])
    with pytest.raises(ValueError, match="a DRPC stream runs one request per batch"):
        t.join(requests, ["args"], b, ["y"], ["k", "z"])
    with pytest.raises(TypeError, match="needs a LocalDRPC"):
        t.new_drpc_stream("f", object())
    t.new_drpc_stream("f", drpc)
    with pytest.raises(ValueError, match="already exists"):
        t.new_drpc_stream("f", drpc)


def test_a_state_fed_by_new_values_is_refused_at_build():
    t = TridentTopology()
    counts = (t.new_stream("s", FixedBatchSpout(["w"], 1, ["a"])).group_by(["w"])
              .persistent_aggregate(MemoryMapState.factory("transactional"), Count(), ["c"]))
    counts.new_values_stream().group_by(["w"]).persistent_aggregate(MemoryMapState.factory("opaque"), Count(), ["n"])
    with pytest.raises(ValueError, match="new_values_stream"):
        t.build()


def test_new_values_of_partition_persist_need_its_function_fields():
    t = TridentTopology()
    state = t.new_stream("s", FixedBatchSpout(["w"], 1, ["a"])).partition_persist(
        MemoryMapState.factory("non-transactional"), ["w"], object())
    with pytest.raises(ValueError, match="function_fields"):
        state.new_values_stream()


def test_a_drpc_stream_ending_in_a_state_is_refused_at_build(drpc):
    t = TridentTopology()
    (t.new_drpc_stream("f", drpc).each(["args"], Split(), ["w"]).group_by(["w"])
     .persistent_aggregate(MemoryMapState.factory("transactional"), Count(), ["c"]))
    with pytest.raises(ValueError, match="DRPC stream 'f' ends with a state"):
        t.build()
