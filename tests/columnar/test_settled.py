"""Batches to columnar tasks settle whole (no edge per row; a spout's edges stay on the driver,
acked there once the batch is settled): the trees still balance row for row, a batch gone
astray loses its wave, and rows fail and replay exactly on both engines."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from squall import Config, LocalCluster, Spout, TopologyBuilder
from squall.columnar import ColumnarBolt
from squall.engine.tasks.columnar_task import ColumnarBoltTask
from squall.engine.tasks.spout_task import SpoutTask
from squall.reliability.ids import RootIdGenerator
from squall.reliability.ledger import XorLedger
from squall.reliability.settled import Sent, Settled, sent_of, unsettled
from tests.support.settled_loss import run_dropping_first_settled

from .test_columnar_engines import ColumnSpout, FailOnce


class Sentences(Spout):
    def __init__(self, sentences):
        self.sentences = sentences

    def open(self, conf, ctx, c):
        self.c = c

    def declare_output_fields(self, d):
        d.declare(["sentence"])

    def next_tuple(self):
        n = len(self.sentences)
        self.c.emit_batch({"sentence": pa.array(self.sentences)}, msg_ids=np.arange(n))


class Split(ColumnarBolt):
    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute_batch(self, batch, c):
        words = pc.split_pattern(batch.column(0), " ")
        c.emit_batch({"word": pc.list_flatten(words)},
                     np.repeat(np.arange(batch.num_rows), pc.list_value_length(words).to_numpy()))


class Leaf(ColumnarBolt):
    """Acks every row; fails the rows whose word is `bad`."""

    def __init__(self, bad=None):
        self.bad = bad

    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute_batch(self, batch, c):
        if self.bad is not None:
            c.fail_rows(pc.equal(batch.column(0), self.bad).to_numpy(zero_copy_only=False))


def _wave(leaf: Leaf):
    """One wave of spout -> split -> leaf, task by task, with what each task produced and the
    Sent records of the spout's batch."""
    sentences = [f"w{i % 7} w{i % 11} w{i % 13}" for i in range(300)]
    b = TopologyBuilder()
    b.set_spout("s", Sentences(sentences))
    b.set_bolt("split", Split(), 1).shuffle_grouping("s")
    b.set_bolt("leaf", leaf, 2).fields_grouping("split", ["word"])
    topo = b.create_topology()
    conf = {Config.TOPOLOGY_ACKER_EXECUTORS: 1}
    spout = SpoutTask(topo, "s", 0, conf, topo.specs["s"].obj)
    spout.open()
    res = spout.begin()
    spout.spout.next_tuple()
    sw = spout.end(RootIdGenerator().take, True)
    assert len(res.outputs) == 1
    spout_sent = sent_of(res.outputs)
    split = ColumnarBoltTask(topo, "split", 0, conf, Split())
    split_res = split.run([pickle.loads(pickle.dumps(b)) for _, b in res.outputs], 1)
    leaves = {t: ColumnarBoltTask(topo, "leaf", i, conf, leaf) for i, t in enumerate(topo.task_ids["leaf"])}
    sent = [(t, pickle.dumps(b)) for t, b in [*res.outputs, *split_res.outputs]]
    leaf_res = [leaves[t].run([pickle.loads(blob)], 1) for t, blob in sent[1:]]
    return sw, spout_sent, split_res, sent, leaf_res


def test_rows_sent_to_a_columnar_task_travel_without_edges_and_the_trees_balance():
    sw, spout_sent, split_res, sent, leaf_res = _wave(Leaf())
    # spout -> split and split -> leaf: no edge values travel (roots only), each batch settled
    assert sum(len(pickle.loads(blob)) for _, blob in sent[1:]) == 900
    for _, blob in sent:
        batch = pickle.loads(blob)
        assert batch.anc_settle is not None and not batch.anc_val.any()
        batch.anc_settle = None  # as a batch with edge values: 8 bytes a row more
        assert len(pickle.dumps(batch)) - len(blob) >= 8 * len(batch)
    all_sent = spout_sent + split_res.sent
    all_settled = split_res.settled + [s for r in leaf_res for s in r.settled]
    assert sorted((s.batch, s.rows) for s in all_sent) == sorted((s.batch, s.rows) for s in all_settled)
    assert unsettled(all_sent, all_settled) is None
    # no task says anything per row, and the spout made no edge: every tree starts at 0 and,
    # with no message holding it once the wave is found whole, is done
    assert all(not r.ack_roots and not r.fail_roots for r in [split_res, *leaf_res])
    assert len(sw.roots) == 300 and not sw.init_vals.any()
    done = XorLedger(1).apply(sw.roots, sw.init_vals, sw.roots[:0], sw.init_vals[:0])
    assert sorted(done.completed.tolist()) == sw.roots.tolist()


def test_a_failed_row_of_a_settled_batch_fails_exactly_its_root():
    sw, _, split_res, sent, leaf_res = _wave(Leaf(bad="w3"))
    failed = sorted({r for res in leaf_res for r in res.fail_roots})
    expected = [int(sw.roots[i]) for i in range(300) if 3 in (i % 7, i % 11, i % 13)]
    assert failed == expected
    out = XorLedger(1).apply(sw.roots, sw.init_vals, sw.roots[:0], sw.init_vals[:0], np.array(failed, np.uint64))
    assert sorted(out.failed.tolist()) == expected
    assert sorted(out.completed.tolist()) == sorted(set(sw.roots.tolist()) - set(expected))


def test_unsettled_names_the_batch_gone_astray():
    sent = [Sent(11, 5, "split", 3, 7), Sent(12, 4, "split", 3, 8)]
    assert unsettled(sent, [Settled(11, 5), Settled(12, 4)]) is None
    assert unsettled([], []) is None
    msg = unsettled(sent, [Settled(11, 5)])
    assert "4 row(s) that split[3] sent to task 8 came back settled for 0" in msg
    msg = unsettled(sent, [Settled(11, 2), Settled(12, 3)])
    assert "settled for 2 (and 1 more)" in msg


@pytest.mark.parametrize("ackers", [1, 2])
def test_columnar_chain_fails_and_replays_exactly_the_failed_rows(cluster_kwargs, ackers):
    b = TopologyBuilder()
    b.set_spout("s", ColumnSpout(10_000))
    b.set_bolt("work", FailOnce(4321), 2).fields_grouping("s", ["k"])
    b.set_bolt("sink", FailOnce(777), 2).fields_grouping("work", ["k"])
    cluster = LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs)
    cluster.submit_topology("t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30, Config.TOPOLOGY_MAX_SPOUT_PENDING: 20000,
                                  Config.TOPOLOGY_ACKER_EXECUTORS: ackers}, b.create_topology())
    with cluster:
        cluster.wait_idle()
        spout = cluster.spout_instances("t", "s")[0]
        assert sorted(spout.failed) == [777, 4321]
        assert sorted(spout.acked) == list(range(10_000))
        stats = cluster.get_topology_stats("t")
        assert stats["work"]["executed"] == 10_002  # each failed row's tuple replayed once, nothing more
        assert stats["sink"]["executed"] == 10_002


def test_a_batch_nobody_settled_loses_its_wave(monkeypatch):
    """Were a batch to go astray (a bug), its trees must not complete: the wave is lost, its
    roots fail and replay. Simulated on the local engine by dropping the first wave's Settled."""
    b = TopologyBuilder()
    b.set_spout("s", ColumnSpout(2_000))
    b.set_bolt("work", FailOnce(-1), 1).shuffle_grouping("s")
    b.set_bolt("sink", FailOnce(-1), 1).shuffle_grouping("work")
    run_dropping_first_settled(monkeypatch, ColumnarBoltTask, "sink", b.create_topology(), 2_000, "work")


def test_settled_roots_stay_runs_until_a_row_needs_them():
    """A settled batch's roots arrive as runs (a sentence's words share its root) and stay so
    through concatenation; the first look at anc_root expands them, with zero edge values, and
    pickling without a look sends the same runs."""
    import pickle

    import pyarrow as pa

    from squall.columnar.batch import ColumnBatch, concat
    from squall.reliability.batch import one_each

    parts = []
    for k, sizes in enumerate(([3, 1, 4, 6] * 20, [5, 9] * 30)):  # words per sentence
        roots = np.repeat(np.arange(1000 * k + 1, 1000 * k + 1 + len(sizes), dtype=np.uint64), sizes)
        words = pa.record_batch({"word": [str(i) for i in range(len(roots))]})
        b = ColumnBatch("split", "default", ("word",), k, words, one_each(len(roots)), roots,
                        np.zeros(len(roots), np.uint64))
        b.anc_settle = 77 + k
        got = pickle.loads(pickle.dumps(b))
        assert got._runs is not None and got._root is None
        parts.append((got, roots))
    whole = concat([p for p, _ in parts])
    assert whole._runs is not None and whole._root is None and whole.settled
    again = pickle.loads(pickle.dumps(whole))  # sent on unexpanded: the same runs
    assert np.array_equal(again.anc_root, np.concatenate([r for _, r in parts]))
    assert np.array_equal(whole.anc_root, np.concatenate([r for _, r in parts]))
    assert whole.anc_val.dtype == np.uint64 and not whole.anc_val.any() and len(whole.anc_val) == len(whole)
