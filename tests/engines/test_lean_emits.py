"""The lean emit path (squall.api.collectors.LeanEmits): an emit anchored to the input being
executed, on a stream with one single-target route, is recorded as an int key and its values
in the target's bucket. Its children must be exactly what the general path makes for the same
emits: the same values per target, in the same order, the same edge ids, out-ack values and
ack messages. Checked task by task against the same task with the lean path turned off."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from squall import BasicBolt, Bolt, Config, OutputCollector, Spout, TopologyBuilder
from squall.engine.tasks.bolt_task import BoltTask
from squall.reliability import bolt_trees
from squall.reliability.batch import TupleBatch

N = 300


class Src(Spout):  # its batches are made by hand here: only its declared fields matter
    def declare_output_fields(self, d):
        d.declare(["tid", "text"])


class Mixed(Bolt):
    """Per input, by a hash of its id: lean emits (anchored to the input, on the fields-grouped
    and the global stream), emits the general path takes (unanchored, anchored twice, anchored
    to an earlier input of the batch), then ack, fail or neither."""

    def prepare(self, conf, ctx, c):
        self.c, self.earlier = c, None

    def declare_output_fields(self, d):
        d.declare(["word"])
        d.declare(["tid", "n"], stream="totals")

    def execute(self, t):
        tid = t["tid"]
        h = zlib.crc32(str(tid).encode())
        for k, w in enumerate(t["text"].split()):
            how = (h >> k) % 9
            if how == 0:
                self.c.emit([w])  # unanchored
            elif how == 1:
                self.c.emit([w], anchors=[t, t])  # anchored twice: once, as Storm XORs
            elif how == 2 and self.earlier is not None and not self.earlier._done:
                self.c.emit([w], anchors=self.earlier)  # another input of the batch
            else:
                self.c.emit([w], anchors=t)
        self.c.emit([tid, len(t["text"])], anchors=t, stream="totals")
        fate = h % 7
        if fate < 5:
            self.c.ack(t)
        elif fate == 5:
            self.c.fail(t)
        else:
            self.earlier = t  # held: acked in a later batch, or never


class LeanOnly(BasicBolt):
    def declare_output_fields(self, d):
        d.declare(["word"])
        d.declare(["tid", "n"], stream="totals")

    def execute(self, t, c):
        for w in t["text"].split():
            c.emit([w])
        c.emit([t["tid"], len(t["text"])], stream="totals")


class TupleValues(LeanOnly):
    """LeanOnly's emits with their values as tuples, as Storm's Python wrappers allow."""

    def execute(self, t, c):
        for w in t["text"].split():
            c.emit((w,))
        c.emit((t["tid"], len(t["text"])), stream="totals")


class ListAnchored(Bolt):
    """Storm's documented split: every emit anchored with a list (or tuple) of the one input,
    then an ack."""

    def prepare(self, conf, ctx, c):
        self.c = c

    def declare_output_fields(self, d):
        d.declare(["word"])
        d.declare(["tid", "n"], stream="totals")

    def execute(self, t):
        for w in t["text"].split():
            self.c.emit([w], anchors=[t])
        self.c.emit([t["tid"], len(t["text"])], anchors=(t,), stream="totals")
        self.c.ack(t)


class Joined(Bolt):
    """A join's anchoring: each word anchored to its input and to the input before it, in either
    order (by the input's hash), that one acked after; the first input of a run alone. The input
    before is from an earlier batch at a batch's start (the general path), else from this one."""

    def prepare(self, conf, ctx, c):
        self.c, self.previous = c, None

    def declare_output_fields(self, d):
        d.declare(["word"])
        d.declare(["tid", "n"], stream="totals")

    def execute(self, t):
        prev = self.previous
        swap = zlib.crc32(str(t["tid"]).encode()) % 2
        for w in t["text"].split():
            self.c.emit([w], anchors=[t] if prev is None else [prev, t] if swap else (t, prev))
        self.c.emit([t["tid"], len(t["text"])], anchors=t, stream="totals")
        if prev is not None:
            self.c.ack(prev)
        self.previous = t


class JoinedMixed(Joined):
    """Joined, and by the input's hash then one more word: anchored as `(t,)` (the lean path
    still), or unanchored (the general path: the batch's join emits so far become general
    records, each with both its anchors)."""

    def execute(self, t):
        super().execute(t)
        how = zlib.crc32(str(t["tid"]).encode()) % 7
        if how == 0:
            self.c.emit(["late"], anchors=(t,))
        elif how == 1:
            self.c.emit(["loose"])


class Sink(BasicBolt):
    def declare_output_fields(self, d):
        pass

    def execute(self, t, c):
        pass


class KeepAll(Bolt):
    """Holds its inputs, and its task does not report them settled (as a stateful bolt's,
    whose acks wait for a checkpoint): children sent to it carry their edges."""

    _settles_inputs = False

    def prepare(self, conf, ctx, c):
        self.c = c

    def declare_output_fields(self, d):
        pass

    def execute(self, t):
        pass


def _topology(bolt, sink, keeper=None):
    b = TopologyBuilder()
    b.set_spout("src", Src(), 1)
    b.set_bolt("work", bolt, 2).shuffle_grouping("src")
    b.set_bolt("words", sink, 3).fields_grouping("work", ["word"])
    b.set_bolt("totals", keeper or KeepAll(), 2).global_grouping("work", "totals")
    return b.create_topology()


def _batch(seed, tracked=True):
    rng = np.random.default_rng(seed)
    words = ["storm", "spark", "tuple", "bolt", "wave", "tree", "acker"]
    values = [[i, " ".join(rng.choice(words, size=int(rng.integers(0, 6))))] for i in range(N)]
    b = TupleBatch("src", "default", ("tid", "text"), 0, values)
    if tracked:
        nroots = rng.integers(1, 3, size=N)  # one or two roots a row
        b.anc_off = np.zeros(N + 1, np.int64)
        np.cumsum(nroots, out=b.anc_off[1:])
        b.anc_root = rng.integers(1, 1 << 62, size=int(nroots.sum()), dtype=np.int64).astype(np.uint64)
        b.anc_val = rng.integers(1, 1 << 62, size=int(nroots.sum()), dtype=np.int64).astype(np.uint64)
    return b


def _run(bolt_cls, sink_cls, lean: bool, batches, conf=None, keeper=None):
    topo = _topology(bolt_cls(), sink_cls(), keeper)
    task = BoltTask(topo, "work", 1, Config(conf or {}), bolt_cls())
    if not lean:
        for so in task.streams.values():
            so.bucket = -1
    results = [task.run([b], wave=7 + k) for k, b in enumerate(batches)]
    return task, results


def _children(res):
    out = []
    for target, b in res.outputs:
        anc = None if b.anc_off is None else (b.anc_off.tolist(), b.anc_root.tolist(), b.anc_val.tolist())
        out.append((target, b.stream, [list(v) for v in b.values], anc, b.anc_settle))
    return sorted(out, key=lambda c: (c[0], c[1]))


def _acks(res):
    roots = np.concatenate(res.ack_roots) if res.ack_roots else np.zeros(0, np.uint64)
    vals = np.concatenate(res.ack_vals) if res.ack_vals else np.zeros(0, np.uint64)
    order = np.lexsort((vals, roots))
    return roots[order].tolist(), vals[order].tolist(), sorted(res.fail_roots)


@pytest.mark.parametrize("bolt_cls", [Mixed, LeanOnly, ListAnchored, Joined, JoinedMixed])
@pytest.mark.parametrize("sink_cls", [Sink, KeepAll])
@pytest.mark.parametrize("tracked", [True, False])
def test_lean_children_are_the_general_paths(bolt_cls, sink_cls, tracked):
    batches = [_batch(1, tracked), _batch(2, tracked)]
    lean_task, lean = _run(bolt_cls, sink_cls, True, batches)
    gen_task, general = _run(bolt_cls, sink_cls, False, [_batch(1, tracked), _batch(2, tracked)])
    for a, b in zip(lean, general):
        assert a.emitted == b.emitted > 0
        assert _children(a) == _children(b)
        assert _acks(a) == _acks(b)
        assert sorted(a.sent) == sorted(b.sent)
    # and the lean path was taken: the general path's stream marks are off only in the other
    assert any(so.bucket >= 0 for so in lean_task.streams.values())


@pytest.mark.parametrize("bolt_cls", [LeanOnly, TupleValues, ListAnchored, Joined])
def test_a_lean_batch_needs_no_emit_records(monkeypatch, bolt_cls):
    """LeanOnly's emits (their values lists or tuples), a Bolt's anchored with `anchors=[t]`, and
    a join's anchored to the input and another input of the batch, all take the lean path: the
    collector hands over keys and buckets only (and the join's other anchors)."""
    topo = _topology(bolt_cls(), Sink())
    task = BoltTask(topo, "work", 0, Config(), bolt_cls())
    seen = []
    take = OutputCollector.take_recorded

    def spy(self):
        rec = take(self)
        seen.append(rec)
        return rec

    monkeypatch.setattr(OutputCollector, "take_recorded", spy)
    task.run([_batch(3)], wave=1)
    (rec,) = seen
    words = sum(len(v[1].split()) for v in _batch(3).values)
    assert rec.emits == [] and rec.lean is not None and len(rec.lean) == words + N
    first = len(_batch(3).values[0][1].split())
    pairs = rec.lean.others(np.array(rec.lean.keys, np.int64))  # (emit, row) pairs, flat
    assert len(pairs) == 2 * (words - first if bolt_cls is Joined else 0)
    # every child sits in the bucket of the task its grouping picks, in emit order; a one-field
    # stream's values flat (the word, as its batch travels), others as their lists
    expect: dict[tuple[str, int], list] = {}
    for row in _batch(3).values:
        for w in row[1].split():
            expect.setdefault(("default", topo.task_ids["words"][zlib.crc32(w.encode()) % 3]), []).append(w)
        expect.setdefault(("totals", min(topo.task_ids["totals"])), []).append([row[0], len(row[1])])
    got = {(so.stream, task_id): rec.lean.values[b] for b, (so, task_id) in enumerate(rec.lean.buckets)
           if rec.lean.values[b]}
    assert got == expect


def test_children_to_settling_tasks_carry_no_edges_on_the_lean_path():
    """BasicBolt sinks settle whole: lean children to them are marked and carry zeros."""
    lean_task, (res,) = _run(LeanOnly, Sink, True, [_batch(4)])
    to_sink = [b for t, b in res.outputs if b.stream == "default"]
    assert to_sink and all(b.anc_settle is not None and not b.anc_val.any() for b in to_sink)
    assert sorted(s.batch for s in res.sent) == sorted(b.anc_settle for b in to_sink)
    to_keeper = [b for t, b in res.outputs if b.stream == "totals"]
    assert to_keeper and all(b.anc_settle is None and b.anc_val.all() for b in to_keeper)


def test_a_joins_children_to_settling_tasks_are_the_general_paths(monkeypatch):
    """Every child of a join goes to a task that settles and each input has one root (a
    sentence's): a child takes its two inputs' roots (once when they are one) with no edge, and
    no edge id is made; the children and acks are the general path's all the same. A batch with
    a child of a held input is edged whole, or marked to settle."""

    def one_root(seed):
        b = _batch(seed)
        b.anc_off = np.arange(N + 1, dtype=np.int64)
        b.anc_root = np.random.default_rng(seed).integers(1, 6, size=N).astype(np.uint64)  # repeats
        b.anc_val = np.zeros(N, np.uint64)
        b.anc_settle = 1000 + seed  # as it comes from a spout: no edges, to settle
        return b

    edged = []
    real = bolt_trees.anchor_own_rows
    monkeypatch.setattr(bolt_trees, "anchor_own_rows", lambda *a, **k: edged.append(1) or real(*a, **k))
    _, lean = _run(Joined, Sink, True, [one_root(5), one_root(6)], keeper=Sink())
    assert not edged  # the lean path made no edge
    _, general = _run(Joined, Sink, False, [one_root(5), one_root(6)], keeper=Sink())
    for a, b in zip(lean, general):
        assert _children(a) == _children(b)
        assert _acks(a) == _acks(b)
    anchors = [b for _, b in lean[0].outputs if b.stream == "default"]  # the second's first input: a held one
    assert any(np.diff(b.anc_off).max() == 2 for b in anchors)  # some children anchored to two roots
    assert all(not b.anc_val.any() for b in anchors)
    # the second batch's first emit is anchored to the first's last input, held (a real edge):
    # then each child has its edge, or the batch would mix rows with and without one, unmarked
    for res in (lean[1], general[1]):
        for _, b in res.outputs:
            assert b.anc_settle is not None or b.anc_val.all()


def test_a_one_field_streams_children_leave_flat_and_arrive_as_rows():
    """The words' batches are flat on the way (no list per row pickled or made), and the rows a
    receiver reads are the emitted ones."""
    import pickle

    _, (res,) = _run(LeanOnly, Sink, True, [_batch(5)])
    words = [(t, b) for t, b in res.outputs if b.stream == "default"]
    assert words and all(b.flat is not None and b._rows is None for _, b in words)
    for _, b in words:
        got = pickle.loads(pickle.dumps(b))
        assert got.flat == b.flat and got.values == [[w] for w in b.flat]
    sent = sorted(w for _, b in words for w in b.flat)
    assert sent == sorted(w for row in _batch(5).values for w in row[1].split())


class TwoStreams(Spout):
    """Emits each row on a fields-grouped one-field stream and a shuffled two-field one; one row
    in five without a msg id (untracked)."""

    def declare_output_fields(self, d):
        d.declare(["word"])
        d.declare(["tid", "text"], stream="pairs")

    def open(self, conf, ctx, c):
        self.c, self.i = c, 0

    def next_tuple(self):
        i = self.i
        self.i += 1
        mid = None if i % 5 == 4 else i
        self.c.emit([f"w{i % 13}"], msg_id=mid)
        self.c.emit([i, f"t{i}"], msg_id=None if mid is None else -i - 1, stream="pairs")


def _spout_wave(lean: bool, n: int = 500):
    from squall.engine.tasks.spout_task import SpoutTask

    b = TopologyBuilder()
    b.set_spout("src", TwoStreams())
    b.set_bolt("words", Sink(), 3).fields_grouping("src", ["word"])
    b.set_bolt("pairs", KeepAll(), 2).shuffle_grouping("src", "pairs")
    st = SpoutTask(b.create_topology(), "src", 0, Config(), TwoStreams())
    if not lean:
        for so in st.streams.values():
            so.bucket = -1
    st.open()
    st.begin()
    for _ in range(n):
        st.spout.next_tuple()
    first = 1 << 33  # the same root ids for both runs
    return st, st.end(lambda k: np.arange(first, first + k, dtype=np.uint64), True)


def test_a_spouts_lean_emits_start_the_same_trees_as_the_general_path():
    (lst, lean), (_, general) = _spout_wave(True), _spout_wave(False)
    assert lean.msg_ids == general.msg_ids and len(lean.msg_ids) == 800  # 4 in 5 rows, on two streams
    assert lean.roots.tolist() == general.roots.tolist()
    assert lean.init_vals.tolist() == general.init_vals.tolist()
    # a word's one child goes to a BasicBolt, which settles whole: no edge, its tree starts at 0;
    # a pair's goes to a bolt that holds it: one edge
    to_pairs = np.array([type(m) is int and m < 0 for m in lean.msg_ids])
    assert lean.init_vals[to_pairs].all() and not lean.init_vals[~to_pairs].any()
    assert _children(lean.result) == _children(general.result)
    assert [list(v) for v in lst.last_values] == [list(v) for v in _spout_wave(False)[0].last_values]
    assert lst.collector.take_recorded() == []  # nothing was left on the general path
