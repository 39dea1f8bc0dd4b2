"""Property tests: random DAG topologies mixing ordinary and columnar bolts, with random
fan-out, multi-anchoring and random ack / fail / never-ack choices (a columnar bolt fails
random rows and acks the rest). An oracle computed from what the bolts did (not from squall's
ledger) says each root's fate: acked iff every tuple of its tree was acked, failed if any was
failed, timed out (so failed) otherwise; and each root is reported exactly once."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from squall import Bolt, Spout, TopologyBuilder
from squall.columnar import ColumnarBolt
from squall.testing import complete_topology

FIELDS = ["tid", "roots", "parents", "by"]
GROUPINGS = ["shuffle", "fields", "all", "global", "local_or_shuffle"]


def choice(tid: str, comp: str, salt: int, what: str, n: int) -> int:
    return zlib.crc32(f"{tid}|{comp}|{salt}|{what}".encode()) % n


def fate(tid: str, comp: str, salt: int, p_fail: int, p_hold: int) -> str:
    x = choice(tid, comp, salt, "fate", 100)
    return "fail" if x < p_fail else "hold" if x < p_fail + p_hold else "ack"


class SourceSpout(Spout):
    def declare_output_fields(self, d):
        d.declare(FIELDS)


class RandomBolt(Bolt):
    """Per input: 0-3 children (anchored, self-anchored [t, t], or unanchored), then ack,
    fail, or hold forever, all decided by a hash of the input's id."""

    def __init__(self, salt, p_fail, p_hold, max_fanout):
        self.salt, self.p_fail, self.p_hold, self.max_fanout = salt, p_fail, p_hold, max_fanout

    def prepare(self, conf, context, collector):
        self.c = collector
        self.me = f"{context.this_component_id}:{context.this_task_index}"
        self.comp = context.this_component_id
        self.held = []

    def declare_output_fields(self, d):
        d.declare(FIELDS)

    def execute(self, t):
        tid = t["tid"]
        for k in range(choice(tid, self.comp, self.salt, "fanout", self.max_fanout + 1)):
            how = choice(tid, self.comp, self.salt, f"anchor{k}", 4)
            child = f"{self.me}/{tid}.{k}"
            if how == 0:
                self.c.emit([child, (), (tid,), self.me])
            elif how == 1:
                self.c.emit([child, t["roots"], (tid,), self.me], anchors=[t, t])
            else:
                self.c.emit([child, t["roots"], (tid,), self.me], anchors=t)
        f = fate(tid, self.comp, self.salt, self.p_fail, self.p_hold)
        if f == "ack":
            self.c.ack(t)
        elif f == "fail":
            self.c.fail(t)
        else:
            self.held.append(t)


class ColumnarRandomBolt(ColumnarBolt):
    """RandomBolt's rules on a whole batch: per input row 0-3 children, anchored to it or not
    (one emit_batch each), then the rows whose hash says "fail" fail; every other row is acked."""

    def __init__(self, salt, p_fail, p_hold, max_fanout):
        self.salt, self.p_fail, self.p_hold, self.max_fanout = salt, p_fail, p_hold, max_fanout

    def prepare(self, conf, context):
        self.me = f"{context.this_component_id}:{context.this_task_index}"
        self.comp = context.this_component_id

    def declare_output_fields(self, d):
        d.declare(FIELDS)

    def execute_batch(self, batch, c):
        tids, roots = batch.column("tid").to_pylist(), batch.column("roots").to_pylist()
        out = {True: ([], []), False: ([], [])}  # anchored? -> (rows, anchors)
        failed = []
        for i, tid in enumerate(tids):
            for k in range(choice(tid, self.comp, self.salt, "fanout", self.max_fanout + 1)):
                anchored = choice(tid, self.comp, self.salt, f"anchor{k}", 4) != 0
                rows, anchors = out[anchored]
                rows.append([f"{self.me}/{tid}.{k}", tuple(roots[i]) if anchored else (), (tid,), self.me])
                anchors.append(i)
            failed.append(fate(tid, self.comp, self.salt, self.p_fail, self.p_hold) == "fail")
        for anchored, (rows, anchors) in out.items():
            if rows:
                cols = {f: [r[j] for r in rows] for j, f in enumerate(FIELDS)}
                c.emit_batch(cols, np.array(anchors) if anchored else None)
        c.fail_rows(np.array(failed, bool))


def fate_in(obj, tid, comp, salt, p_fail, p_hold):
    """What the bolt `obj` does with input `tid`: a columnar bolt acks what it does not fail."""
    f = fate(tid, comp, salt, p_fail, p_hold)
    return "ack" if f == "hold" and isinstance(obj, ColumnarBolt) else f


class JoinBolt(Bolt):
    """Holds inputs in pairs, emits one child anchored to both (multi-anchoring across trees),
    then acks, fails or holds each parent as its hash says."""

    def __init__(self, salt, p_fail, p_hold):
        self.salt, self.p_fail, self.p_hold = salt, p_fail, p_hold

    def prepare(self, conf, context, collector):
        self.c = collector
        self.me = f"{context.this_component_id}:{context.this_task_index}"
        self.comp = context.this_component_id
        self.waiting = []
        self.held = []
        self.n = 0

    def declare_output_fields(self, d):
        d.declare(FIELDS)

    def execute(self, t):
        self.waiting.append(t)
        if len(self.waiting) < 2:
            return
        a, b = self.waiting
        self.waiting = []
        roots = tuple(sorted(set(a["roots"]) | set(b["roots"])))
        self.n += 1
        self.c.emit([f"{self.me}/j{self.n}", roots, (a["tid"], b["tid"]), self.me], anchors=[a, b])
        for p in (a, b):
            f = fate(p["tid"], self.comp, self.salt, self.p_fail, self.p_hold)
            if f == "ack":
                self.c.ack(p)
            elif f == "fail":
                self.c.fail(p)
            else:
                self.held.append(p)


@dataclass
class BoltPlan:
    kind: str  # "random", "join" or "columnar"
    parallelism: int
    sources: list[tuple[int, str]]  # (index into the component list, grouping)


@st.composite
def topologies(draw):
    n_spouts = draw(st.integers(1, 2))
    n_bolts = draw(st.integers(1, 5))
    spouts = [draw(st.integers(1, 3)) for _ in range(n_spouts)]
    plans = []
    for i in range(n_bolts):
        upstream = n_spouts + i
        k = draw(st.integers(1, min(2, upstream)))
        srcs = draw(st.lists(st.integers(0, upstream - 1), min_size=k, max_size=k, unique=True))
        plans.append(BoltPlan(draw(st.sampled_from(["random", "random", "join", "columnar"])), draw(st.integers(1, 3)),
                              [(s, draw(st.sampled_from(GROUPINGS))) for s in srcs]))
    tuples = [draw(st.integers(1, 6)) for _ in range(n_spouts)]
    return spouts, plans, tuples, draw(st.integers(0, 10**6)), draw(st.integers(0, 20)), \
        draw(st.integers(0, 25)), draw(st.integers(0, 3))


def build(spouts, plans, salt, p_fail, p_hold, max_fanout):
    b = TopologyBuilder()
    names = [f"s{i}" for i in range(len(spouts))] + [f"b{i}" for i in range(len(plans))]
    for i, par in enumerate(spouts):
        b.set_spout(names[i], SourceSpout(), parallelism=par)
    for i, plan in enumerate(plans):
        bolt = RandomBolt(salt, p_fail, p_hold, max_fanout) if plan.kind == "random" else \
            ColumnarRandomBolt(salt, p_fail, p_hold, max_fanout) if plan.kind == "columnar" else \
            JoinBolt(salt, p_fail, p_hold)
        d = b.set_bolt(names[len(spouts) + i], bolt, parallelism=plan.parallelism)
        for src, g in plan.sources:
            if g == "fields":
                d.fields_grouping(names[src], ["tid"])
            else:
                getattr(d, f"{g}_grouping")(names[src])
    return b.create_topology(), names


def oracle(topology, names, result, mocked, salt, p_fail, p_hold):
    """Expected acked roots, from what every component emitted and the bolts' decision rules."""
    fates: dict[str, list[str]] = {}  # root -> fates of every delivery in its tree
    spout_ids = [n for n in names if topology.specs[n].is_spout]
    all_roots = [r[1][0] for s in spout_ids for r in mocked[s]]
    for r in all_roots:
        fates[r] = []
    for comp in names:
        emitted = result.emitted(comp)
        for sub, g in topology.subscribers.get((comp, "default"), []):
            copies = topology.specs[sub].parallelism if g.kind == "all" else 1
            if isinstance(topology.specs[sub].obj, JoinBolt):
                paired: dict[str, int] = {}
                for v in result.emitted(sub):
                    for p in v[2]:
                        paired[p] = paired.get(p, 0) + 1
            for v in emitted:
                tid, roots = v[0], v[1]
                if isinstance(topology.specs[sub].obj, JoinBolt):
                    n_paired = min(paired.get(tid, 0), copies)
                    outcomes = [fate(tid, sub, salt, p_fail, p_hold)] * n_paired + ["hold"] * (copies - n_paired)
                    paired[tid] = paired.get(tid, 0) - n_paired
                else:
                    outcomes = [fate_in(topology.specs[sub].obj, tid, sub, salt, p_fail, p_hold)] * copies
                for r in roots:
                    fates[r].extend(outcomes)
    return {r for r, fs in fates.items() if all(f == "ack" for f in fs)}, set(all_roots)


def check(engine, spark, params):
    spouts, plans, counts, salt, p_fail, p_hold, max_fanout = params
    topology, names = build(spouts, plans, salt, p_fail, p_hold, max_fanout)
    mocked = {}
    for i, n in enumerate(counts):
        mocked[f"s{i}"] = [[f"s{i}-{k}", (f"s{i}-{k}",), (), f"s{i}"] for k in range(n)]
    result = complete_topology(topology, mocked, conf={"topology.message.timeout.secs": 10}, engine=engine,
                               spark=spark)
    expected_acked, all_roots = oracle(topology, names, result, mocked, salt, p_fail, p_hold)
    acked, failed = set(), set()
    for i in range(len(spouts)):
        a, f = result.acked(f"s{i}"), result.failed(f"s{i}")
        assert len(a) == len(set(a)) and len(f) == len(set(f)), "a root was reported twice"
        assert not set(a) & set(f), "a root was both acked and failed"
        assert len(a) + len(f) == counts[i], "a root was never reported"
        acked |= {mocked[f"s{i}"][m][0] for m in a}
        failed |= {mocked[f"s{i}"][m][0] for m in f}
    assert acked == expected_acked
    assert failed == all_roots - expected_acked


# Always run: columnar bolts fed by a spout, by a tuple bolt and by another columnar bolt, with
# every grouping kind between them, and failed rows.
MIXED = ([2], [BoltPlan("columnar", 2, [(0, "fields")]), BoltPlan("random", 2, [(1, "shuffle")]),
               BoltPlan("columnar", 3, [(2, "all"), (1, "local_or_shuffle")]),
               BoltPlan("join", 2, [(3, "fields"), (1, "global")])], [6], 7, 20, 10, 3)
# A columnar chain (its batches settle whole, no edges: reliability/settled.py) into a tuple bolt
# that holds and fails, then a columnar bolt again.
SETTLED = ([2], [BoltPlan("columnar", 2, [(0, "fields")]), BoltPlan("columnar", 2, [(1, "shuffle")]),
                 BoltPlan("random", 2, [(2, "fields")]), BoltPlan("columnar", 2, [(3, "shuffle")])], [6], 7, 20, 10, 3)
# Found by a Spark run (2026-11-27): a join pairs two children of one sentence that a columnar bolt
# emitted alike from rows of a settled batch; they once had one edge id, which the join's child
# XORed out twice, and the sentence was acked with that child held downstream.
SHARED_EDGE = ([1], [BoltPlan("random", 1, [(0, "shuffle")]),
                     BoltPlan("columnar", 1, [(0, "shuffle"), (1, "shuffle")]),
                     BoltPlan("join", 2, [(0, "shuffle"), (2, "all")]),
                     BoltPlan("random", 1, [(3, "shuffle"), (0, "shuffle")])], [4], 118467, 0, 13, 3)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies())
@example(MIXED)
@example(SETTLED)
@example(SHARED_EDGE)
def test_random_topologies_local(params):
    check("local", None, params)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(params=topologies())
@example(params=MIXED)
@example(params=SETTLED)
@example(params=SHARED_EDGE)
def test_random_topologies_spark(spark_session, params):
    check("spark", spark_session, params)
