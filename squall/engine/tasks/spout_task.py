"""One task of a spout, on the driver: its instance and collector; turns a wave's emits into
output batches and the roots of the trees they start."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from squall.api.collectors import LeanEmits
from squall.api.components import Spout
from squall.api.rebinding import restoring
from squall.api.spout_collector import SpoutOutputCollector
from squall.api.topology import StormTopology
from squall.engine.tasks.outputs import EmitValues, bucket_children, group_children
from squall.engine.tasks.sealing import crosses, crosses_all, describe, unserializable_rows
from squall.engine.tasks.task import TaskBase
from squall.engine.tasks.task_result import TaskResult
from squall.observe.errors import ErrorRecord
from squall.reliability.anchoring import Anchors
from squall.reliability.batch import one_each
from squall.reliability.emits import EmitIndex
from squall.reliability.pending import FailReason
from squall.reliability.roots import SharedRoot, spout_edges, spout_trees
from squall.reliability.settled import mark_settling

_EMPTY_U = np.zeros(0, np.uint64)


def _takes_reason(fn: Callable) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "reason" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def settles_acks_in_batches(cls: type) -> bool:
    """Whether a wave's acks go to `ack_batch` in one call: the spout's class defines one (not
    Spout's default), and no subclass below that definition overrides `ack` (a user's subclass
    of a batching spout that audits each ack keeps getting `ack`, as in Storm)."""
    batch_owner = next((k for k in cls.__mro__ if "ack_batch" in k.__dict__), Spout)
    if batch_owner is Spout:
        return False
    ack_owner = next((k for k in cls.__mro__ if "ack" in k.__dict__), batch_owner)
    return ack_owner is batch_owner or not issubclass(ack_owner, batch_owner)


class SpoutWave(NamedTuple):
    """What a spout task's emits of one wave became."""

    result: TaskResult
    msg_ids: list  # of the emits that start a tree
    roots: np.ndarray  # their roots (empty without tracking)
    init_vals: np.ndarray  # their init values
    rejected: list[tuple[Any, FailReason]]  # msg ids whose values cannot cross to a task: failed at once


class SpoutTask(TaskBase):
    """One task of a spout, on the driver: calls next_tuple and turns emits into root trees."""

    def __init__(self, topology: StormTopology, component: str, task_index: int, conf: dict, instance: Any,
                 capture: bool = False):
        super().__init__(topology, component, task_index, conf, capture)
        self.collector = SpoutOutputCollector(component, self.streams, self, lean=not capture)
        self.opened = False
        self.active = True
        self.last_values: Sequence = []  # per tracked root, its values (column emits: squall.columnar.spout.RowRefs)
        self._column_routes: dict | None = None  # vectorized routes, made on the first column emit
        if instance is not None:
            self._bind(instance)
        self.settle_to = topology.settling_tasks()  # edges to them are 0 (reliability/settled.py)
        self.settling = np.array(sorted(self.settle_to), np.int64) if self.settle_to else None
        self._bucket_tasks: np.ndarray | None = None  # lean bucket -> target task id (made on first use)

    def snapshot(self, dumps: Any) -> bytes:
        """The task's carried state: its spout instance (its collector and context pickle as
        references: squall.api.rebinding), whether it is active, its routing counters."""
        return dumps((self.spout, self.opened, self.active, self.routing_state(), self._late_errors,
                      self.context.metrics))

    @classmethod
    def restore(cls, topology: StormTopology, component: str, task_index: int, conf: dict, blob: bytes,
                loads: Any, capture: bool = False) -> SpoutTask:
        """The task as `snapshot` had it: open already, its instance not opened again."""
        task = cls(topology, component, task_index, conf, None, capture)
        with restoring(task):
            spout, task.opened, task.active, routing, task._late_errors, task.context.metrics = loads(blob)
        task._bind(spout)
        task.restore_routing(routing)
        return task

    def ack(self, msg_ids: list) -> list[ErrorRecord]:
        """Tell the spout these trees completed (`ack_batch` once, or `ack` for each); what raised."""
        spout = self.spout
        if self._acks_in_batches:
            try:
                spout.ack_batch(msg_ids)
            except Exception as e:  # noqa: BLE001 - reported; the topology goes on
                return [ErrorRecord.from_exception(self.component, self.task_id, e,
                                                   f"ack_batch of {len(msg_ids)} msg id(s), from {msg_ids[0]!r}")]
            return []
        errors = []
        for m in msg_ids:
            try:
                spout.ack(m)
            except Exception as e:  # noqa: BLE001
                errors.append(ErrorRecord.from_exception(self.component, self.task_id, e, m))
        return errors

    def fail(self, msg_id: Any, reason: FailReason) -> list[ErrorRecord]:
        """Tell the spout this tree failed (with the reason, if its fail takes one); what raised."""
        errors = []
        try:
            if self._fail_takes_reason:
                self.spout.fail(msg_id, reason=reason)
            else:
                self.spout.fail(msg_id)
        except Exception as e:  # noqa: BLE001
            errors.append(ErrorRecord.from_exception(self.component, self.task_id, e, msg_id))
        return errors + self.take_late_errors()

    def _bind(self, instance: Any) -> None:
        self.spout = instance
        self._fail_takes_reason = _takes_reason(instance.fail)
        self._acks_in_batches = settles_acks_in_batches(type(instance))

    def open(self) -> None:
        if not self.opened:
            self.opened = True
            self.spout.open(self.conf, self.context, self.collector)

    def begin(self) -> TaskResult:
        # Emits made between waves (in open, ack or fail: a replay) stay recorded: they go out in this wave.
        res = self._res = self._new_result()
        return res

    def end(self, roots_for: Any, tracking: bool) -> SpoutWave:
        """Turn this wave's emits into output batches, giving each emit with a msg id a root.
        roots_for(k) hands out k root ids; without tracking the roots are empty."""
        res = self._res
        self._res = None
        lean = self.collector.take_lean()
        if lean is not None:
            if crosses_all(lean[1], lean[2]):
                wave = self._lean_wave(res, lean, roots_for, tracking)
                columns = self.collector.take_columns()
                return self._add_columns(wave, columns, roots_for, tracking) if columns else wave
            self.collector.as_general(lean)  # a value that cannot cross: the general path finds it
        emits = self.collector.take_recorded()
        res.emitted = len(emits)
        if res.captured is not None:
            self._capture(res, emits)
        emits, rejected = self._reject_unserializable(emits, res)
        if not emits:
            self.last_values = []
            wave = SpoutWave(res, [], _EMPTY_U, _EMPTY_U, rejected)
        else:
            streams, values, mids, targets = zip(*emits)
            ix = EmitIndex.of_spout(values, streams, targets)
            trees = spout_trees(mids, ix.child_emit, ix.child_target, roots_for, tracking, self.settling)
            children = group_children(self.component, self.task_id, len(self.streams), ix, trees.child_anchors)
            if trees.child_anchors is not None:  # batches to settling tasks: no edges (reliability/settled.py)
                mark_settling(children, self.settle_to, int(trees.roots[0]) if len(trees.roots) else 0)
            res.outputs.extend(children)
            self.last_values = [values[j] for j in trees.tracked_emits]  # kept for the dead-letter sink
            wave = SpoutWave(res, trees.msg_ids, trees.roots, trees.init_vals, rejected)
        columns = self.collector.take_columns()
        return self._add_columns(wave, columns, roots_for, tracking) if columns else wave

    def _lean_wave(self, res: TaskResult, lean: tuple, roots_for: Any, tracking: bool) -> SpoutWave:
        """The lean path's emits (squall.api.spout_collector): a root and one edge per tracked
        emit (its one child), the same ids `spout_trees` gives, and the children already split
        by destination."""
        keys, vals, buckets, mids = lean
        n = len(keys)
        res.emitted = n
        emits = LeanEmits(keys, vals, buckets)
        untracked = mids.count(None)
        if not tracking or untracked == n:
            self.last_values = []
            res.outputs.extend(bucket_children(self.component, self.task_id, emits, None, None))
            return SpoutWave(res, [m for m in mids if m is not None], _EMPTY_U, _EMPTY_U, [])
        bucket = np.array(keys, np.int64)
        if self._bucket_tasks is None:
            self._bucket_tasks = np.array([t for _, t in buckets], np.int64)
        tracked = None if not untracked else np.fromiter((m is not None for m in mids), bool, n)
        rows = np.arange(n) if tracked is None else np.flatnonzero(tracked)
        roots = roots_for(len(rows))
        edges = spout_edges(roots, rows.astype(np.uint64), self._bucket_tasks[bucket[rows]], self.settling)
        if tracked is None:
            anchors = Anchors(one_each(n), roots, edges)
            msg_ids = mids
        else:
            off = np.zeros(n + 1, np.int64)
            np.cumsum(tracked, out=off[1:])
            anchors = Anchors(off, roots, edges)
            msg_ids = [m for m in mids if m is not None]
        children = bucket_children(self.component, self.task_id, emits, bucket, anchors)
        mark_settling(children, self.settle_to, int(roots[0]))  # to settling tasks: no edges
        res.outputs.extend(children)
        self.last_values = EmitValues(emits, bucket, rows)  # for the dead-letter sink, made when read
        return SpoutWave(res, msg_ids, roots, edges, [])  # one edge per root: its init value (0 to a settling task)

    def _add_columns(self, wave: SpoutWave, columns: list[tuple], roots_for: Any, tracking: bool) -> SpoutWave:
        """The wave's column emits (SpoutOutputCollector.emit_batch of columns), added to its trees."""
        from squall.columnar.arrow import batch_to_rows  # noqa: PLC0415 - only spouts that emit columns
        from squall.columnar.spout import column_trees  # noqa: PLC0415
        from squall.routing.columns import stream_column_routes  # noqa: PLC0415

        if self._column_routes is None:
            self._column_routes = {name: stream_column_routes(self.topology, so, self.task_index)
                                   for name, so in self.streams.items()}
        got = column_trees(self.component, self.task_id, columns, self._column_routes, roots_for, tracking,
                           self.settle_to)
        res = wave.result
        res.emitted += got.rows
        res.outputs.extend(got.outputs)
        if res.captured is not None:
            for so, data, _, _ in columns:
                res.captured.setdefault(so.stream, []).extend(batch_to_rows(data))
        self.last_values = got.values if not self.last_values else [*self.last_values, *got.values]
        return SpoutWave(res, wave.msg_ids + got.msg_ids, np.concatenate([wave.roots, *got.roots]),
                         np.concatenate([wave.init_vals, *got.init_vals]), wave.rejected)

    def _reject_unserializable(self, emits: list[tuple], res: TaskResult) -> tuple[list[tuple], list]:
        """Emits whose values cannot cross to a bolt task never start a tree: each is reported
        and its msg id failed at once (every emit of a SharedRoot goes with it: one tree)."""
        if not emits:
            return emits, []
        values = [e[1] for e in emits]
        if crosses(values):
            return emits, []
        bad = unserializable_rows(values)
        rejected, bad_mids = [], set()
        for j, field, err in bad:
            so, vals, mid = emits[j][0], emits[j][1], emits[j][2]
            rec = describe(self.component, self.task_id, so.stream, so.fields, vals, field, err)
            res.errors.append(rec)
            if mid is not None and id(mid) not in bad_mids:
                bad_mids.add(id(mid))
                msg_id = mid.msg_id if type(mid) is SharedRoot else mid
                rejected.append((msg_id, FailReason("error", self.component, self.task_id, rec.error)))
        bad_rows = {j for j, _, _ in bad}
        kept = [e for j, e in enumerate(emits) if j not in bad_rows and id(e[2]) not in bad_mids]
        return kept, rejected
