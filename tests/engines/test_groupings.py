"""All seven groupings, multiple streams, emit's returned task ids, emit_direct; both engines,
and the same target task for the same tuple on both."""

from __future__ import annotations

from collections import Counter

import pytest

from squall import Bolt, Spout, TopologyBuilder
from squall.routing.tuples import stable_hash
from squall.testing import complete_topology


class Numbers(Spout):
    def declare_output_fields(self, d):
        d.declare(["n"])


class Fanout(Bolt):
    """Emits each input on streams "evens"/"odds" and directly to task (n mod tasks) of "direct"."""

    def prepare(self, conf, context, collector):
        self.c = collector
        self.direct_tasks = context.component_tasks("direct")
        self.ids = context.component_tasks("fields")

    def declare_output_fields(self, d):
        d.declare(["n", "tasks"], stream="evens")
        d.declare(["n", "tasks"], stream="odds")
        d.declare(["n"], stream="to_direct", direct=True)

    def execute(self, t):
        n = t[0]
        stream = "evens" if n % 2 == 0 else "odds"
        tasks = self.c.emit([n, None], anchors=t, stream=stream)
        assert isinstance(tasks, list)
        self.c.emit_direct(self.direct_tasks[n % len(self.direct_tasks)], [n], anchors=t, stream="to_direct")
        self.c.ack(t)


class Where(Bolt):
    """Emits (its task index, the input's n)."""

    def prepare(self, conf, context, collector):
        self.c = collector
        self.index = context.this_task_index

    def declare_output_fields(self, d):
        d.declare(["task", "n"])

    def execute(self, t):
        self.c.emit([self.index, t[0]], anchors=t)
        self.c.ack(t)


def build():
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(), parallelism=2)
    b.set_bolt("fan", Fanout(), parallelism=2).shuffle_grouping("numbers")
    b.set_bolt("fields", Where(), parallelism=3).fields_grouping("fan", ["n"], stream="evens")
    b.set_bolt("all", Where(), parallelism=3).all_grouping("fan", stream="odds")
    b.set_bolt("global", Where(), parallelism=3).global_grouping("fan", stream="evens").global_grouping(
        "fan", stream="odds")
    b.set_bolt("none", Where(), parallelism=2).none_grouping("fan", stream="odds")
    b.set_bolt("direct", Where(), parallelism=3).direct_grouping("fan", stream="to_direct")
    b.set_bolt("local", Where(), parallelism=2).local_or_shuffle_grouping("fan", stream="evens")
    return b.create_topology()


def test_groupings(cluster_kwargs, engine):
    nums = list(range(24))
    r = complete_topology(build(), {"numbers": [[n] for n in nums]}, engine=engine, spark=cluster_kwargs.get("spark"))
    assert r.acked("numbers") == list(range(24)) and r.failed("numbers") == []
    evens, odds = [n for n in nums if n % 2 == 0], [n for n in nums if n % 2]
    fields = r.emitted("fields")
    assert sorted(n for _, n in fields) == evens
    assert all(task == stable_hash(n) % 3 for task, n in fields)  # the same task on every machine
    all_ = r.emitted("all")
    assert Counter(n for _, n in all_) == Counter({n: 3 for n in odds})
    assert {t for t, _ in all_} == {0, 1, 2}
    g = r.emitted("global")
    assert sorted(n for _, n in g) == nums and {t for t, _ in g} == {0}
    assert sorted(n for _, n in r.emitted("none")) == odds
    d = r.emitted("direct")
    assert sorted(n for _, n in d) == nums and all(t == n % 3 for t, n in d)
    loc = r.emitted("local")
    assert sorted(n for _, n in loc) == evens


def test_same_targets_on_both_engines(spark_session):
    mocked = {"numbers": [[n] for n in range(30)]}
    a = complete_topology(build(), mocked, engine="local")
    b = complete_topology(build(), mocked, engine="spark", spark=spark_session)
    for comp in ("fields", "all", "global", "none", "direct", "local"):
        assert sorted(a.emitted(comp)) == sorted(b.emitted(comp)), comp


def test_emit_direct_errors():
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())

    class BadDirect(Bolt):
        def prepare(self, conf, context, collector):
            self.c = collector

        def declare_output_fields(self, d):
            d.declare(["n"], stream="d", direct=True)
            d.declare(["n"])

        def execute(self, t):
            if t[0] == 0:
                self.c.emit_direct(999, [0], anchors=t, stream="d")
            elif t[0] == 1:
                self.c.emit_direct(1, [1], anchors=t)  # default stream is not direct
            else:
                self.c.emit([2], anchors=t, stream="d")
            self.c.ack(t)

    b.set_bolt("bad", BadDirect()).shuffle_grouping("numbers")
    b.set_bolt("sink", Where(), parallelism=2).direct_grouping("bad", stream="d")
    r = complete_topology(b.create_topology(), {"numbers": [[0], [1], [2]]})
    assert r.failed("numbers") == [0, 1, 2]
    msgs = sorted(e.error for e in r.errors)
    assert any("does not subscribe to stream 'd' with direct grouping" in m for m in msgs)
    assert any("which is not declared direct" in m for m in msgs)
    assert any("is declared direct; use emit_direct" in m for m in msgs)


@pytest.mark.parametrize("values", [[1, 2], ("a",), ["x"]])
def test_stable_hash_is_process_independent(values):
    import subprocess
    import sys

    code = f"from squall.routing.tuples import fields_hash; print(fields_hash({values!r}, list(range({len(values)}))))"
    out = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout for _ in range(3)}
    assert len(out) == 1 and out.pop().strip().isdigit()
