"""Batches to Bolt and BasicBolt tasks settle whole (reliability/settled.py): a BasicBolt acks or fails
every input when `execute` returns, so the tuples sent to one carry no edge values, a spout's
edges stay on the driver (acked there once the batch is settled), and the trees still balance
and fail exactly per tuple on both engines."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from squall import BasicBolt, Bolt, Config, LocalCluster, Spout, TopologyBuilder
from squall.api.components import FailedException
from squall.columnar import ColumnarBolt
from squall.engine.tasks.bolt_task import BoltTask
from squall.engine.tasks.spout_task import SpoutTask
from squall.reliability.ids import RootIdGenerator
from squall.reliability.ledger import XorLedger
from squall.reliability.settled import sent_of, unsettled
from squall.testing import FeederSpout, complete_topology
from tests.support.settled_loss import run_dropping_first_settled


class Sentences(Spout):
    def __init__(self, n, replay=True):
        self.n, self.replays = n, replay

    def open(self, conf, ctx, c):
        self.c, self.sent, self.replay, self.acked, self.failed = c, False, [], [], []

    def declare_output_fields(self, d):
        d.declare(["sentence"])

    def next_tuple(self):
        ids = [] if self.sent else list(range(self.n))
        self.sent = True
        ids, self.replay = ids + self.replay, []
        for i in ids:
            self.c.emit([f"w{i % 7} w{i % 11} w{i % 13}"], msg_id=i)

    def ack(self, msg_id):
        self.acked.append(msg_id)

    def fail(self, msg_id):
        self.failed.append(msg_id)
        if self.replays:
            self.replay.append(msg_id)


class Split(BasicBolt):
    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute(self, t, c):
        for w in t[0].split():
            c.emit([w])


class Count(BasicBolt):
    """Counts words; fails the word `bad` the first time it sees it (FailedException)."""

    def __init__(self, bad=None):
        self.bad = bad

    def prepare(self, conf, ctx):
        self.n, self.seen_bad = {}, False

    def declare_output_fields(self, d):
        d.declare(["word", "n"])

    def execute(self, t, c):
        w = t[0]
        if w == self.bad and not self.seen_bad:
            self.seen_bad = True
            raise FailedException("bad word")
        self.n[w] = self.n.get(w, 0) + 1


def _topology(n, bad=None, replay=True):
    b = TopologyBuilder()
    b.set_spout("s", Sentences(n, replay))
    b.set_bolt("split", Split(), 2).shuffle_grouping("s")
    b.set_bolt("count", Count(bad), 2).fields_grouping("split", ["word"])
    return b.create_topology()


def test_tuples_to_basic_bolts_carry_no_edges_and_their_trees_complete_with_no_message():
    topo = _topology(300)
    conf = {Config.TOPOLOGY_ACKER_EXECUTORS: 1}
    spout = SpoutTask(topo, "s", 0, conf, topo.specs["s"].obj)
    spout.open()
    spout.begin()
    spout.spout.next_tuple()
    sw = spout.end(RootIdGenerator().take, True)
    spout_sent = sent_of(sw.result.outputs)
    assert sorted(s.rows for s in spout_sent) == sorted(len(b) for _, b in sw.result.outputs)
    assert len(sw.roots) == 300 and not sw.init_vals.any()  # no edge made: each tree starts at 0
    splits = {t: BoltTask(topo, "split", i, conf, Split()) for i, t in enumerate(topo.task_ids["split"])}
    counts = {t: BoltTask(topo, "count", i, conf, Count()) for i, t in enumerate(topo.task_ids["count"])}
    results = []
    words = []
    for target, b in sw.result.outputs:
        blob = pickle.dumps(b)
        got = pickle.loads(blob)
        assert got.anc_settle == b.anc_settle is not None and not got.anc_val.any()
        results.append(splits[target].run([got], 1))
        words.extend(results[-1].outputs)
    for target, b in words:
        got = pickle.loads(pickle.dumps(b))
        assert got.anc_settle is not None and not got.anc_val.any()
        results.append(counts[target].run([got], 1))
    assert all(not r.ack_roots and not r.fail_roots for r in results)  # nothing to say per tuple
    sent = spout_sent + [s for r in results for s in r.sent]
    settled = [s for r in results for s in r.settled]
    assert unsettled(sent, settled) is None
    assert unsettled(sent, settled[1:]) is not None
    done = XorLedger(1).apply(sw.roots, sw.init_vals, sw.roots[:0], sw.init_vals[:0])
    assert sorted(done.completed.tolist()) == sorted(sw.roots.tolist())


def test_a_failed_word_fails_and_replays_exactly_its_sentences(cluster_kwargs):
    cluster = LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs)
    cluster.submit_topology("t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30, Config.TOPOLOGY_MAX_SPOUT_PENDING: 5000},
                            _topology(2000, bad="w3"))
    with cluster:
        cluster.wait_idle()
        spout = cluster.spout_instances("t", "s")[0]
        assert len(spout.failed) == 1  # one sentence with w3 (which one: the order its count task saw them)
        f = spout.failed[0]
        assert 3 in (f % 7, f % 11, f % 13)
        assert sorted(spout.acked) == list(range(2000))
        stats = cluster.get_topology_stats("t")
        assert stats["split"]["executed"] == 2001  # that one sentence replayed, nothing more
        assert stats["count"]["executed"] == 6003


def test_a_spout_batch_nobody_settled_loses_its_wave(monkeypatch):
    """Were a spout's batch to go astray (a bug), its trees must not complete though no edge
    holds them: the wave is lost and its tuples replay. Simulated on the local engine by
    dropping a split task's first Settled."""
    run_dropping_first_settled(monkeypatch, BoltTask, "split", _topology(500), 500, "s")


class Echo(BasicBolt):
    """One child per word, anchored to it (a BasicBolt anchors to its input)."""

    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute(self, t, c):
        c.emit([t[0]])


class ColumnarEcho(ColumnarBolt):
    """The same, for a whole batch: each row's child anchored to it."""

    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute_batch(self, batch, c):
        c.emit_batch({"word": batch.column(0)}, np.arange(batch.num_rows))


class Join(Bolt):
    """Pairs its inputs and emits one child anchored to both (Storm's multi-anchoring), then
    acks both parents."""

    def prepare(self, conf, ctx, c):
        self.c, self.waiting = c, []

    def declare_output_fields(self, d):
        d.declare(["pair"])

    def execute(self, t):
        self.waiting.append(t)
        if len(self.waiting) == 2:
            a, b = self.waiting
            self.waiting = []
            self.c.emit([f"{a[0]}+{b[0]}"], anchors=[a, b])
            self.c.ack(a)
            self.c.ack(b)


class HoldAll(Bolt):
    """Holds every input: never acks, never fails."""

    def prepare(self, conf, ctx, c):
        self.held = []

    def declare_output_fields(self, d):
        pass

    def execute(self, t):
        self.held.append(t)


@pytest.mark.parametrize("echo", ["basic", "columnar"])
@pytest.mark.parametrize("held", [True, False], ids=["a_child_held", "all_acked"])
def test_children_of_settled_rows_of_one_tree_keep_their_own_edges(cluster_kwargs, echo, held):
    """A settled batch's rows have no edge value, so rows of one sentence once shared their
    identity, and the children they emitted alike the same edge id: the two children the join
    anchors to were XORed out of the tree together, and the sentence was acked while its
    join's child was still held (found by test_properties). Now the sentence waits for it."""
    b = TopologyBuilder()
    b.set_spout("src", FeederSpout(["sentence"]))
    b.set_bolt("split", Split()).shuffle_grouping("src")
    b.set_bolt("echo", Echo() if echo == "basic" else ColumnarEcho()).shuffle_grouping("split")
    b.set_bolt("join", Join(), parallelism=2).all_grouping("echo")  # two children a row: no derived edges
    b.set_bolt("end", HoldAll() if held else Count()).global_grouping("join")
    result = complete_topology(b.create_topology(), {"src": [["a b"], ["c d e f"]]},
                               conf={Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, **cluster_kwargs)
    assert len(result.emitted("join")) == 6  # a+b, c+d, e+f in each join task
    if held:  # the join's children are held at "end": both sentences time out
        assert result.acked("src") == [] and sorted(result.failed("src")) == [0, 1]
    else:
        assert sorted(result.acked("src")) == [0, 1] and result.failed("src") == []


class HoldSevenths(Bolt):
    """Storm's split (`anchors=[t]`, then ack), but it holds every seventh sentence until it is
    told to let them go (`release`: it acks them, and holds no more), as a join waiting for its
    other side does."""

    release = False

    def prepare(self, conf, ctx, c):
        self.c, self.held = c, []

    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute(self, t):
        for w in t[0].split():
            self.c.emit([w], anchors=[t])
        if self.release:
            for h in self.held:
                self.c.ack(h)
            self.held = []
        if t[0].startswith("w0 ") and not self.release:  # every 7th sentence: i % 7 == 0
            self.held.append(t)
        else:
            self.c.ack(t)


def _wave(spout, splits, counts, ids):
    """One wave at the task level: the spout's emits (`ids` next), the splits, the counts; the
    spout's roots and init values, and every ack message and Sent/Settled record."""
    spout.spout.replay = list(ids)
    spout.begin()
    spout.spout.next_tuple()
    sw = spout.end(spout.gen.take, True)
    results = []
    for target, b in sw.result.outputs:
        results.append(splits[target].run([pickle.loads(pickle.dumps(b))], 1))
    for target, b in [c for r in results for c in r.outputs]:
        results.append(counts[target].run([pickle.loads(pickle.dumps(b))], 1))
    roots = np.concatenate([np.zeros(0, np.uint64)] + [a for r in results for a in r.ack_roots])
    vals = np.concatenate([np.zeros(0, np.uint64)] + [a for r in results for a in r.ack_vals])
    sent = sent_of(sw.result.outputs) + [s for r in results for s in r.sent]
    return sw, roots, vals, unsettled(sent, [s for r in results for s in r.settled])


def test_a_bolt_settles_what_it_acks_and_gives_what_it_holds_an_edge_of_its_own():
    """A plain Bolt's task settles its batches: a spout's tuples to it carry no edges and what it
    acks in the wave says nothing more; an input it holds past its batch gets a fresh edge, sent
    with the wave, so its sentence stays pending until the later ack, which balances it."""
    b = TopologyBuilder()
    b.set_spout("s", Sentences(0))
    b.set_bolt("split", HoldSevenths(), 2).shuffle_grouping("s")
    b.set_bolt("count", Count(), 2).fields_grouping("split", ["word"])
    topo = b.create_topology()
    conf = {Config.TOPOLOGY_ACKER_EXECUTORS: 1}
    spout = SpoutTask(topo, "s", 0, conf, topo.specs["s"].obj)
    spout.open()
    spout.gen = RootIdGenerator()
    splits = {t: BoltTask(topo, "split", i, conf, HoldSevenths()) for i, t in enumerate(topo.task_ids["split"])}
    counts = {t: BoltTask(topo, "count", i, conf, Count()) for i, t in enumerate(topo.task_ids["count"])}
    ledger = XorLedger(1)
    sw, roots, vals, astray = _wave(spout, splits, counts, range(70))
    assert astray is None and not sw.init_vals.any()  # settled whole, no edge made by the spout
    held = [i for i in range(70) if i % 7 == 0]
    assert len(roots) == len(held)  # one message a held sentence, none for the acked
    done = ledger.apply(sw.roots, sw.init_vals, roots, vals)
    by_root = dict(zip(sw.roots.tolist(), sw.msg_ids))
    assert sorted(by_root[r] for r in done.completed.tolist()) == [i for i in range(70) if i % 7]
    for task in splits.values():
        task.bolt.release = True
    sw2, roots, vals, astray = _wave(spout, splits, counts, range(70, 90))  # acks what was held
    assert astray is None
    done = ledger.apply(sw2.roots, sw2.init_vals, roots, vals)
    by_root.update(zip(sw2.roots.tolist(), sw2.msg_ids))
    assert sorted(by_root[r] for r in done.completed.tolist()) == held + list(range(70, 90))
