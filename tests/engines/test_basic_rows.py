"""A BasicBolt's batch run without a list of Tuples (BasicBoltExecutor.execute_rows): a Tuple
nobody holds after `execute` is the next row's. Whatever the bolt does with its inputs (keeps
them, raises, fails them, emits on the general path between lean emits), the task's result
must be exactly the one of running a Tuple per row (execute_all over tuples_of), and a kept
Tuple must stay its own row's."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from squall import BasicBolt, Bolt, Config, FailedException, Spout, TopologyBuilder
from squall.api.basic_bolt import BasicBoltExecutor
from squall.engine.tasks.bolt_task import BoltTask
from squall.reliability.batch import TupleBatch
from squall.reliability.tuple import tuples_of

N = 400


class Src(Spout):
    def declare_output_fields(self, d):
        d.declare(["tid", "text"])


class Moody(BasicBolt):
    """Per input, by a hash of its id: keeps the Tuple, keeps only its values, raises, fails it,
    or emits on the all-grouped stream (the general path) after its lean word emits."""

    def prepare(self, conf, ctx):
        self.kept = []  # (tid, its Tuple)
        self.values_kept = []
        self.ids = set()

    def declare_output_fields(self, d):
        d.declare(["word"])
        d.declare(["tid"], stream="everyone")

    def execute(self, t, c):
        tid = t["tid"]
        self.ids.add(id(t))
        fate = zlib.crc32(str(tid).encode()) % 11
        for w in t["text"].split():
            c.emit([w])
        if fate == 0:
            self.kept.append((tid, t))
        elif fate == 1:
            self.values_kept.append((tid, t.values))
        elif fate == 2:
            raise ValueError(f"no {tid}")
        elif fate == 3:
            raise FailedException(f"failed {tid}")
        elif fate == 4:
            c.emit([tid], stream="everyone")


class Quiet(BasicBolt):
    def prepare(self, conf, ctx):
        self.ids = set()

    def declare_output_fields(self, d):
        d.declare(["word"])
        d.declare(["tid"], stream="everyone")

    def execute(self, t, c):
        self.ids.add(id(t))
        for w in t["text"].split():
            c.emit([w])


class Sink(BasicBolt):  # settles whole: children to it carry no edges
    def declare_output_fields(self, d):
        pass

    def execute(self, t, c):
        pass


class Keeper(Bolt):  # does not settle whole: children to it carry their edges
    def prepare(self, conf, ctx, c):
        pass

    def declare_output_fields(self, d):
        pass

    def execute(self, t):
        pass


def _topology(bolt):
    b = TopologyBuilder()
    b.set_spout("src", Src(), 1)
    b.set_bolt("work", bolt, 2).shuffle_grouping("src")
    b.set_bolt("words", Keeper(), 3).fields_grouping("work", ["word"])
    b.set_bolt("all", Sink(), 2).all_grouping("work", "everyone")
    return b.create_topology()


def _batch(seed, tracked=True):
    rng = np.random.default_rng(seed)
    words = ["storm", "spark", "tuple", "bolt", "wave", "tree", "acker"]
    values = [[seed * 10_000 + i, " ".join(rng.choice(words, size=int(rng.integers(0, 6))))] for i in range(N)]
    b = TupleBatch("src", "default", ("tid", "text"), 0, values)
    if tracked:
        b.anc_off = np.arange(N + 1, dtype=np.int64)
        b.anc_root = rng.integers(1, 1 << 62, size=N, dtype=np.int64).astype(np.uint64)
        b.anc_val = rng.integers(1, 1 << 62, size=N, dtype=np.int64).astype(np.uint64)
    return b


def _tuple_per_row(self, batch, on_error):
    tuples = tuples_of(batch)
    self._collector.begin_batch(batch, tuples)
    self.execute_all(tuples, on_error)


def _run(bolt_cls, batches, monkeypatch=None):
    if monkeypatch is not None:
        monkeypatch.setattr(BasicBoltExecutor, "execute_rows", _tuple_per_row)
    task = BoltTask(_topology(bolt_cls()), "work", 1, Config(), bolt_cls())
    results = [task.run([b], wave=3 + k) for k, b in enumerate(batches)]
    if monkeypatch is not None:
        monkeypatch.undo()
    return task, results


def _summary(res):
    children = sorted((t, b.stream, [list(v) for v in b.values],
                       None if b.anc_off is None else (b.anc_off.tolist(), b.anc_val.tolist()))
                      for t, b in res.outputs)
    roots = np.concatenate(res.ack_roots).tolist() if res.ack_roots else []
    vals = np.concatenate(res.ack_vals).tolist() if res.ack_vals else []
    return (children, sorted(zip(roots, vals)), sorted(res.fail_roots), res.acked, res.failed, res.emitted,
            res.executed, [e.error for e in res.errors], sorted(res.sent))


@pytest.mark.parametrize("tracked", [True, False])
def test_rows_run_without_a_tuple_list_give_the_tuple_per_row_result(monkeypatch, tracked):
    batches = [_batch(1, tracked), _batch(2, tracked)]
    task, rows = _run(Moody, batches)
    ref_task, per_row = _run(Moody, [_batch(1, tracked), _batch(2, tracked)], monkeypatch)
    for a, b in zip(rows, per_row):
        assert _summary(a) == _summary(b)
        assert a.acked and a.failed and a.errors  # every fate was taken
    bolt, ref = task.bolt.basic, ref_task.bolt.basic
    assert [tid for tid, _ in bolt.kept] == [tid for tid, _ in ref.kept] and bolt.kept
    for tid, t in bolt.kept:  # a kept Tuple is its own row's, acked
        assert t["tid"] == tid and t.values[0] == tid and t._done == 1
    assert bolt.values_kept == ref.values_kept and bolt.values_kept


def test_a_bolt_that_keeps_no_tuple_gets_one_tuple_object_for_all_rows():
    task, (res,) = _run(Quiet, [_batch(3)])
    assert res.acked == N and not res.failed
    assert len(task.bolt.basic.ids) == 1  # the object is reused: no Tuple made per row


def test_a_tuple_emitted_on_the_general_path_is_not_reused(monkeypatch):
    """An emit the general path records holds its anchor (the input): that Tuple stays as it was."""
    task, rows = _run(Moody, [_batch(4)])
    _, per_row = _run(Moody, [_batch(4)], monkeypatch)
    assert _summary(rows[0]) == _summary(per_row[0])
    everyone = [b for _, b in rows[0].outputs if b.stream == "everyone"]
    assert everyone and len(task.bolt.basic.ids) > 1


def test_emit_returns_the_target_tasks_read_only_and_shared():
    """emit returns its target task ids (Storm's List<Integer>); one read-only list per target,
    returned by every emit to it. It compares, copies and pickles as a list."""
    import pickle

    got = []

    class Returns(BasicBolt):
        def declare_output_fields(self, d):
            d.declare(["word"])
            d.declare(["tid"], stream="nobody")

        def execute(self, t, c):
            for w in t["text"].split():
                got.append((w, c.emit([w])))
            got.append((None, c.emit([t["tid"]], stream="nobody")))

    b = TopologyBuilder()
    b.set_spout("src", Src(), 1)
    b.set_bolt("work", Returns(), 1).shuffle_grouping("src")
    b.set_bolt("words", Keeper(), 3).fields_grouping("work", ["word"])
    topo = b.create_topology()
    BoltTask(topo, "work", 0, Config(), Returns()).run([_batch(5)], wave=1)
    words = topo.task_ids["words"]
    for w, ids in got:
        assert ids == ([words[zlib.crc32(w.encode()) % 3]] if w is not None else [])
    by_task = {ids[0]: ids for w, ids in got if w is not None}
    assert all(ids is by_task[ids[0]] for w, ids in got if w is not None)  # one list per target
    ids = got[0][1]
    for change in (lambda: ids.append(1), lambda: ids.sort(), lambda: ids.__setitem__(0, 1), lambda: ids.clear()):
        with pytest.raises(TypeError, match="read-only"):
            change()
    copy = list(ids)
    copy.append(7)
    assert copy[:-1] == ids and pickle.loads(pickle.dumps(ids)) == ids
