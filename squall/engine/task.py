"""The per-task code, written once for every engine: run a bolt task over its input batches
and turn what the collector recorded into output batches and ack messages, in bulk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from squall.api.collectors import BasicBoltExecutor, OutputCollector, SharedRoot, SpoutOutputCollector, StreamOut
from squall.api.components import BasicBolt
from squall.api.context import TopologyContext
from squall.api.topology import StormTopology
from squall.api.tuple import Tuple
from squall.engine.batch import TupleBatch, single_row
from squall.engine.restore import restoring
from squall.engine.routing import ShuffleCounter, stream_routes
from squall.observe.errors import ErrorRecord
from squall.reliability.anchoring import (
    Anchors,
    Contributions,
    ack_messages,
    anchor_edges,
    expand,
    keys_of,
    roots_of_rows,
)
from squall.reliability.ids import edge_id_int, edge_ids, mix64_int
from squall.reliability.pending import FailReason

log = logging.getLogger("squall")

_U64 = np.uint64
_I64 = np.int64
_EMPTY_U = np.zeros(0, _U64)
_NO_INPUT = TupleBatch("", "", (), -1, [])


@dataclass
class TaskResult:
    """Everything a task produced in one wave."""

    component: str
    task: int
    outputs: list[tuple[int, TupleBatch]] = field(default_factory=list)  # (target task id, batch)
    ack_roots: list[np.ndarray] = field(default_factory=list)
    ack_vals: list[np.ndarray] = field(default_factory=list)
    fail_roots: list[int] = field(default_factory=list)
    fail_reasons: list[FailReason] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    executed: int = 0
    acked: int = 0
    failed: int = 0
    emitted: int = 0
    exec_secs: float = 0.0
    captured: dict[str, list[list]] | None = None


_get_b = attrgetter("_b")
_get_i = attrgetter("_i")
_first = itemgetter(0)
_NONE = type(None)


@dataclass
class EmitIndex:
    """A batch's recorded emits as arrays: children (one per emit and target task), the
    (emit, input row) anchor pairs inside the batch, anchors from other batches (held tuples),
    each emit's input row and its ordinal within that input's execute."""

    values: tuple
    streams: tuple
    child_emit: np.ndarray
    child_target: np.ndarray
    pair_emit: np.ndarray
    pair_row: np.ndarray
    foreign: list[tuple[int, Tuple]]
    multi: bool
    rows: np.ndarray
    ords: np.ndarray


def children_of(targets: Sequence[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(emit index, target task) of every child: an emit has one child per target task."""
    ne = len(targets)
    tlens = np.fromiter(map(len, targets), _I64, ne)
    if (tlens == 1).all():
        return np.arange(ne), np.fromiter(map(_first, targets), _I64, ne)
    return np.repeat(np.arange(ne), tlens), np.fromiter(chain.from_iterable(targets), _I64, int(tlens.sum()))


def index_emits(B: TupleBatch | None, emits: list[tuple]) -> EmitIndex:
    """Mostly C-level (zip transposition, map, numpy); a Python loop only for multi-anchoring
    and anchors from other batches."""
    ne = len(emits)
    streams, values, ancs, targets, rows = zip(*emits)
    rows_a = np.fromiter(rows, _I64, ne)
    change = np.ones(ne, bool)
    np.not_equal(rows_a[1:], rows_a[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    ords = np.arange(ne) - np.repeat(starts, np.diff(np.append(starts, ne)))
    child_emit, child_target = children_of(targets)
    pair_emit: list[int] | np.ndarray = []
    pair_row: list[int] | np.ndarray = []
    foreign: list[tuple[int, Tuple]] = []
    multi = False
    kinds = set(map(type, ancs))
    if kinds == {Tuple} and set(map(id, map(_get_b, ancs))) == {id(B)}:
        pair_emit = np.arange(ne)  # the common case: each emit anchored to one input of this batch
        pair_row = np.fromiter(map(_get_i, ancs), _I64, ne)
    elif kinds != {_NONE}:
        for j, anc in enumerate(ancs):
            if anc is None:
                continue
            if type(anc) is Tuple:
                anc = (anc,)
            elif len(anc) > 1:
                multi = True
            for a in anc:
                if a._b is B:
                    pair_emit.append(j)
                    pair_row.append(a._i)
                else:
                    foreign.append((j, a))
    return EmitIndex(values, streams, child_emit, child_target, np.asarray(pair_emit, _I64),
                     np.asarray(pair_row, _I64), foreign, multi, rows_a, ords)


def root_index_of(root_of_emit: np.ndarray, child_emit: np.ndarray, tracked: list[int],
                  shared: list[int]) -> np.ndarray:
    """For each tracked child: the index of the emit that owns its root (itself, or the first
    emit of its SharedRoot), so a shared root's init value is the XOR of all its edges."""
    if not shared:
        return child_emit
    owner = np.arange(len(root_of_emit))
    first = {}
    for j in tracked:
        first[int(root_of_emit[j])] = j
    rs = root_of_emit[np.array(shared, _I64)]
    owner[np.array(shared, _I64)] = [first[int(r)] for r in rs.tolist()]
    return owner[child_emit]


def build_streams(topology: StormTopology, component: str, task_index: int) -> dict[str, StreamOut]:
    spec = topology.specs[component]
    streams: dict[str, StreamOut] = {}
    for i, (name, decl) in enumerate(sorted(spec.streams.items())):
        routes = stream_routes(topology, component, name, task_index)
        direct_tasks = {t for sub, r in routes if r is None for t in topology.task_ids[sub]}
        streams[name] = StreamOut(component, name, decl.fields, decl.direct, routes, direct_tasks, i)
    return streams


class _TaskBase:
    """What bolt and spout tasks share: identity, error records, the result being built."""

    def __init__(self, topology: StormTopology, component: str, task_index: int, conf: dict, capture: bool):
        self.topology = topology
        self.component = component
        self.task_index = task_index
        self.task_id = topology.task_ids[component][task_index]
        self.conf = conf
        self.capture = capture
        self.debug = bool(conf.get("topology.debug"))
        self.context = TopologyContext(topology, component, task_index)
        self.streams = build_streams(topology, component, task_index)
        self._res: TaskResult | None = None
        self._late_errors: list[ErrorRecord] = []

    def _error(self, rec: ErrorRecord) -> None:
        if self._res is not None:
            self._res.errors.append(rec)
        else:
            self._late_errors.append(rec)

    def report_error(self, error: BaseException | str) -> None:
        self._error(ErrorRecord.from_exception(self.component, self.task_id, error, kind="reported"))

    def _new_result(self) -> TaskResult:
        res = TaskResult(self.component, self.task_id)
        if self._late_errors:
            res.errors.extend(self._late_errors)
            self._late_errors = []
        if self.capture:
            res.captured = {}
        return res

    def _group_children(self, res: TaskResult, ix: EmitIndex, anchors: Anchors | None) -> None:
        """Split children (one per emit and target task) into one batch per (stream, target)."""
        ce, ct = ix.child_emit, ix.child_target
        nc = len(ce)
        if not nc:
            return
        if len(self.streams) > 1:
            sidx = np.fromiter((so.index for so in ix.streams), _I64, len(ix.streams))[ce]
            key = ct * len(self.streams) + sidx
        else:
            key = ct
        if nc > 1 and (key[1:] != key[:-1]).any():
            order = np.argsort(key, kind="stable")
            skey = key[order]
            groups = np.split(order, np.flatnonzero(skey[1:] != skey[:-1]) + 1)
        else:
            groups = [np.arange(nc)]
        values = np.fromiter(ix.values, dtype=object, count=len(ix.values))
        if nc != len(values) or not (ce == np.arange(nc)).all():
            values = values[ce]
        for idx in groups:
            first = int(idx[0])
            so: StreamOut = ix.streams[int(ce[first])]
            target = int(ct[first])
            if anchors is not None and len(anchors.root):
                counts = anchors.counts[idx]
                if counts.any():
                    grp, pos = expand(anchors.off[idx], counts)
                    off = np.zeros(len(idx) + 1, _I64)
                    np.cumsum(counts, out=off[1:])
                    batch = TupleBatch(self.component, so.stream, so.fields, self.task_id, values[idx].tolist(),
                                       off, anchors.root[pos], anchors.val[pos])
                    res.outputs.append((target, batch))
                    continue
            res.outputs.append((target, TupleBatch(self.component, so.stream, so.fields, self.task_id,
                                                   values[idx].tolist())))

    def _capture(self, res: TaskResult, emits: Sequence[tuple]) -> None:
        cap = res.captured
        for e in emits:
            cap.setdefault(e[0].stream, []).append(e[1])


class BoltTask(_TaskBase):
    """One task of a bolt: its instance, collector and routing, carried from wave to wave."""

    def __init__(self, topology: StormTopology, component: str, task_index: int, conf: dict, instance: Any,
                 capture: bool = False):
        super().__init__(topology, component, task_index, conf, capture)
        self.bolt = BasicBoltExecutor(instance) if isinstance(instance, BasicBolt) else instance
        self.collector = OutputCollector(component, self.streams, self)
        self.prepared = False

    def prepare(self) -> None:
        if not self.prepared:
            self.prepared = True
            self.bolt.prepare(self.conf, self.context, self.collector)

    def cleanup(self) -> None:
        self.bolt.cleanup()

    # -- carried across waves as bytes (Spark engine) -------------------------------------

    def _counters(self) -> list[ShuffleCounter]:
        return [r for so in self.streams.values() for _, r in so.routes if isinstance(r, ShuffleCounter)]

    def snapshot(self, dumps: Any) -> bytes:
        """The task's carried state: the bolt instance, whether it is prepared, routing counters."""
        try:
            return dumps((self.bolt, self.prepared, [c.i for c in self._counters()], self._late_errors))
        except Exception as e:
            raise TypeError(
                f"bolt {self.component!r} (task {self.task_id}) cannot be carried to the next wave: {e}. The Spark "
                "engine keeps each bolt instance between waves by pickling it: keep connections, locks and files "
                "out of its attributes (open them on first use and leave them out in __getstate__)"
            ) from e

    @classmethod
    def restore(cls, topology: StormTopology, component: str, task_index: int, conf: dict, blob: bytes,
                loads: Any, capture: bool = False) -> BoltTask:
        task = cls(topology, component, task_index, conf, None, capture)
        with restoring(task):
            task.bolt, task.prepared, counters, task._late_errors = loads(blob)
        for c, i in zip(task._counters(), counters):
            c.i = i
        return task

    # -- called by the collector ----------------------------------------------------------

    def check_anchors(self, anchors: Any) -> tuple[Tuple, ...] | None:
        """Validate anchors; drop (and report) duplicates and tuples already acked or failed."""
        if type(anchors) is Tuple:
            anchors = (anchors,)
        elif not isinstance(anchors, (list, tuple)):
            raise TypeError(
                f"bolt {self.component!r}: anchors must be an input Tuple or a list of them, got {anchors!r}"
            )
        out: list[Tuple] = []
        for a in anchors:
            if type(a) is not Tuple:
                raise TypeError(f"bolt {self.component!r}: anchors must be input Tuples received by execute, got {a!r}")
            if a._done:
                self.twice_anchor(a)
            elif not any(a is b for b in out):  # [t, t] anchors once, as Storm's XORs net out
                out.append(a)
        return tuple(out) if out else None

    def twice(self, t: Tuple, op: str) -> None:
        was = "acked" if t._done == 1 else "failed"
        self._error(ErrorRecord.from_exception(
            self.component, self.task_id,
            f"UserError: {op}() on a tuple that was already {was}; ignored (each input is acked or failed once)",
            t.values, kind="user"))

    # -- the wave -------------------------------------------------------------------------

    def run(self, inbox: Sequence[TupleBatch], wave: int) -> TaskResult:
        self.prepare()
        res = self._res = self._new_result()
        try:
            for batch in inbox:
                if len(batch):
                    self._run_batch(batch, wave, res)
            finish = getattr(self.bolt, "finish_wave", None)
            if finish is not None and inbox:
                self._finish_wave(finish, wave, res)
        finally:
            self._res = None
        return res

    def _finish_wave(self, finish: Any, wave: int, res: TaskResult) -> None:
        """Optional bolt hook, called after the task has run every input it got in a wave
        (Trident uses it to end a batch: partial aggregates, partition aggregates)."""
        coll = self.collector
        coll._emits, coll._acks, coll._fails, coll._resets = [], [], [], []
        coll._row = -1
        try:
            finish()
        except Exception as e:  # noqa: BLE001 - reported; tuples it held fail by timeout or replay
            res.errors.append(ErrorRecord.from_exception(self.component, self.task_id, e))
        self._flush(_NO_INPUT, [], res, wave)

    def _run_batch(self, B: TupleBatch, wave: int, res: TaskResult) -> None:
        coll = self.collector
        coll._emits, coll._acks, coll._fails, coll._resets = [], [], [], []
        execute = self.bolt.execute
        T: list[Tuple] = []
        append = T.append
        new = object.__new__
        component, task_id = self.component, self.task_id
        t0 = time.perf_counter()
        for i, v in enumerate(B.values):
            t = new(Tuple)
            t.values = v
            t._b = B
            t._i = i
            t._done = 0
            t._out = 0
            append(t)
            coll._row = i
            try:
                execute(t)
            except Exception as e:  # the input fails; the task goes on
                rec = ErrorRecord.from_exception(component, task_id, e, v)
                res.errors.append(rec)
                if t._done == 0:
                    t._done = 2
                    coll._fails.append((t, FailReason("error", component, task_id, rec.error)))
        coll._row = -1
        res.exec_secs += time.perf_counter() - t0
        res.executed += len(T)
        self._flush(B, T, res, wave)

    def _flush(self, B: TupleBatch, T: list[Tuple], res: TaskResult, wave: int) -> None:
        coll = self.collector
        emits, acks, fails, resets = coll._emits, coll._acks, coll._fails, coll._resets
        coll._emits, coll._acks, coll._fails, coll._resets = [], [], [], []
        n = len(B)
        anchors = Anchors(B.anc_off, B.anc_root, B.anc_val) if B.anc_off is not None else None
        tracked = anchors is not None and len(anchors.root) > 0
        salt = mix64_int((self.task_id << 32) ^ wave)

        res.emitted += len(emits)
        if res.captured is not None:
            self._capture(res, emits)
        out_ack = np.zeros(n, _U64)
        if not emits:
            ix = None
        else:
            ix = index_emits(B, emits)
            child_anchors: Anchors | None = None
            nc = len(ix.child_emit)
            if (tracked and len(ix.pair_emit)) or ix.foreign:
                keys = keys_of(anchors if anchors is not None else Anchors.empty(n), salt)
                ne = len(emits)
                ccount = np.bincount(ix.child_emit, minlength=ne)
                cstart = np.cumsum(ccount) - ccount
                exec_key_of_emit = np.full(ne, _U64(salt))
                inside = ix.rows >= 0  # emitted inside an execute: that input's key
                exec_key_of_emit[inside] = keys[ix.rows[inside]]
                parts: list[Contributions] = []
                if tracked and len(ix.pair_emit):
                    pe = ix.pair_emit
                    grp, child_idx = expand(cstart[pe], ccount[pe])
                    pj = pe[grp]
                    parts.append(anchor_edges(anchors, keys, ix.pair_row[grp], child_idx, exec_key_of_emit[pj],
                                              ix.ords[pj], ix.child_target[child_idx], out_ack))
                if ix.foreign:
                    parts.append(self._foreign_edges(ix.foreign, ccount, cstart, ix.child_target, exec_key_of_emit,
                                                     ix.ords))
                if parts:
                    contrib = parts[0] if len(parts) == 1 else Contributions(
                        np.concatenate([p.child for p in parts]), np.concatenate([p.root for p in parts]),
                        np.concatenate([p.val for p in parts]))
                    if ix.multi or len(parts) > 1 or ix.foreign:
                        child_anchors = contrib.merged(nc)
                    else:  # one anchor per emit: contributions are already in child order, roots unique
                        counts = np.bincount(contrib.child, minlength=nc)
                        off = np.zeros(nc + 1, _I64)
                        np.cumsum(counts, out=off[1:])
                        child_anchors = Anchors(off, contrib.root, contrib.val)
            self._group_children(res, ix, child_anchors)

        if acks or fails or resets:
            self._acks_and_fails(B, anchors, acks, fails, resets, out_ack, res)
        if self.debug:
            self._log(emits, acks, fails)

        # Tuples still pending after this batch may be held for later waves: keep what they
        # need (their out ack value, their own anchors) and let the batch go.
        if tracked:
            for t in T:
                if t._done == 0:
                    i = t._i
                    t._out ^= int(out_ack[i])
                    lo, hi = anchors.off[i], anchors.off[i + 1]
                    roots, vals = anchors.root[lo:hi], anchors.val[lo:hi]
                    t._b = single_row(B.component, B.stream, B.fields, B.source_task, t.values, roots, vals)
                    t._i = 0

    def _foreign_edges(self, foreign: list[tuple[int, Tuple]], ccount: np.ndarray, cstart: np.ndarray,
                       ct: np.ndarray, exec_key: np.ndarray, ords: np.ndarray) -> Contributions:
        """Edges for anchors received in an earlier batch or wave (held tuples): a Python loop,
        since they are few; their out ack value lives on the Tuple itself."""
        child, root, val = [], [], []
        for j, a in foreign:
            roots, vals = a._b.anchors_of(a._i)
            if not len(roots):
                continue
            ka = mix64_int(int(roots[0]) ^ mix64_int(int(vals[0])))
            ek, od = int(exec_key[j]), int(ords[j])
            for c in range(int(cstart[j]), int(cstart[j] + ccount[j])):
                e = edge_id_int(ka, ek, od, int(ct[c]))
                a._out ^= e
                for r in roots.tolist():
                    child.append(c)
                    root.append(r)
                    val.append(e)
        return Contributions(np.array(child, _I64), np.array(root, _U64), np.array(val, _U64))

    def twice_anchor(self, a: Tuple) -> None:
        was = "acked" if a._done == 1 else "failed"
        self._error(ErrorRecord.from_exception(
            self.component, self.task_id,
            f"UserError: emit anchored to a tuple that was already {was}; that anchor is ignored "
            "(emit anchored children before acking their input)", a.values, kind="user"))

    def _acks_and_fails(self, B: TupleBatch, anchors: Anchors | None, acks: list[Tuple],
                        fails: list[tuple[Tuple, Any]], resets: list[Tuple], out_ack: np.ndarray,
                        res: TaskResult) -> None:
        res.acked += len(acks)
        res.failed += len(fails)
        if anchors is None and all(t._b is B for t in acks) and all(f[0]._b is B for f in fails) \
                and all(t._b is B for t in resets):
            return  # nothing here is tracked
        empty = Anchors.empty(len(B)) if anchors is None else anchors
        ack_rows = [t._i for t in acks if t._b is B]
        if ack_rows and len(empty.root):
            r, v = ack_messages(empty, np.array(ack_rows, _I64), out_ack)
            res.ack_roots.append(r)
            res.ack_vals.append(v)
        for t in acks:
            if t._b is not B:  # held from an earlier batch
                roots, vals = t._b.anchors_of(t._i)
                if len(roots):
                    res.ack_roots.append(roots)
                    res.ack_vals.append(vals ^ _U64(t._out))
        reset_rows = [t._i for t in resets if t._b is B]
        if reset_rows and len(empty.root):
            _, roots = roots_of_rows(empty, np.array(reset_rows, _I64))
            res.ack_roots.append(roots)
            res.ack_vals.append(np.zeros(len(roots), _U64))
        for t in resets:
            if t._b is not B:
                roots, _ = t._b.anchors_of(t._i)
                res.ack_roots.append(roots)
                res.ack_vals.append(np.zeros(len(roots), _U64))
        for t, reason in fails:
            roots, _ = t._b.anchors_of(t._i)
            if len(roots):
                why = reason or FailReason("failed", self.component, self.task_id)
                for r in roots.tolist():
                    res.fail_roots.append(r)
                    res.fail_reasons.append(why)

    def _log(self, emits: Sequence[tuple], acks: list[Tuple], fails: list) -> None:
        for so, values, _anc, targets, _row in emits:
            log.info("%s[%d] emit %s %r -> %s", self.component, self.task_id, so.stream, values, targets)
        for t in acks:
            log.info("%s[%d] ack %r", self.component, self.task_id, t.values)
        for t, _ in fails:
            log.info("%s[%d] fail %r", self.component, self.task_id, t.values)


class SpoutTask(_TaskBase):
    """One task of a spout, on the driver: calls next_tuple and turns emits into root trees."""

    def __init__(self, topology: StormTopology, component: str, task_index: int, conf: dict, instance: Any,
                 capture: bool = False):
        super().__init__(topology, component, task_index, conf, capture)
        self.spout = instance
        self.collector = SpoutOutputCollector(component, self.streams, self)
        self.opened = False
        self.active = True
        self.last_values: list[list] = []

    def open(self) -> None:
        if not self.opened:
            self.opened = True
            self.spout.open(self.conf, self.context, self.collector)

    def begin(self) -> TaskResult:
        self.collector._emits = []
        res = self._res = self._new_result()
        return res

    def end(self, roots_for: Any, tracking: bool) -> tuple[TaskResult, list, np.ndarray, np.ndarray]:
        """Turn this wave's emits into output batches, giving each emit with a msg id a root.

        roots_for(k) hands out k root ids. Returns (result, msg ids of the emits that had one,
        their roots, their init values); without tracking the roots are empty.
        """
        res = self._res
        self._res = None
        emits = self.collector._emits
        self.collector._emits = []
        res.emitted = len(emits)
        if res.captured is not None:
            self._capture(res, emits)
        if not emits:
            self.last_values = []
            return res, [], _EMPTY_U, _EMPTY_U
        streams, values, mids, targets = zip(*emits)
        ce, ct = children_of(targets)
        tracked_emits = [j for j, m in enumerate(mids) if m is not None]
        shared = [j for j in tracked_emits if type(mids[j]) is SharedRoot]
        if shared:  # emits of one SharedRoot are one tree: its first emit stands for the root
            first: dict[int, int] = {}
            owner = {j: first.setdefault(id(mids[j]), j) for j in shared}
            tracked_emits = [j for j in tracked_emits if owner.get(j, j) == j]
        msg_ids = [mids[j].msg_id if type(mids[j]) is SharedRoot else mids[j] for j in tracked_emits]
        anchors = None
        init_roots = init_vals = _EMPTY_U
        if tracking and tracked_emits:
            init_roots = roots_for(len(tracked_emits))
            root_of_emit = np.zeros(len(emits), _U64)
            te = np.array(tracked_emits, _I64)
            root_of_emit[te] = init_roots
            if shared:
                src = np.array([owner[j] for j in shared], _I64)
                root_of_emit[np.array(shared, _I64)] = root_of_emit[src]
            child_root = root_of_emit[ce]
            has = child_root != 0
            k = int(has.sum())
            # one edge per (emit, target): emits sharing a root are told apart by their position
            edges = edge_ids(child_root[has], ce[has].astype(_U64), np.zeros(k, _I64), ct[has])
            off = np.zeros(len(ce) + 1, _I64)
            np.cumsum(has, out=off[1:])
            anchors = Anchors(off, child_root[has], edges)
            # init value per root = XOR of its edges (0 when nothing subscribes: acked at once)
            slot = np.zeros(len(emits), _U64)
            np.bitwise_xor.at(slot, root_index_of(root_of_emit, ce[has], tracked_emits, shared), edges)
            init_vals = slot[te]
        empty = np.zeros(0, _I64)
        ix = EmitIndex(values, streams, ce, ct, empty, empty, [], False, empty, empty)
        self._group_children(res, ix, anchors)
        self.last_values = [values[j] for j in tracked_emits]  # kept for the dead-letter sink
        return res, msg_ids, init_roots, init_vals
