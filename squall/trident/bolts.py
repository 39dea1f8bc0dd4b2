"""The bolts a Trident topology compiles to.

A `ProcessorBolt` runs a segment: an optional batch-level head (an aggregation or a state
query, which needs every tuple of the batch in this partition), then streaming operations
(each, filter, project) fused in one task, then an optional partial combine (a combiner
aggregator's per-partition pre-aggregation before the shuffle). A `StateBolt` keeps the
pending updates of each batch and applies them when the coordinator's commit tuple for that
txid arrives, between `begin_commit(txid)` and `commit(txid)`.

Every tuple of a batch is in one tuple tree. A batch-level step holds one tuple of each batch
it saw (acking the others) and emits its results anchored to it, so the batch's tree stays
open until the results are processed downstream.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from squall.api.components import Bolt
from squall.trident.coordinator import COMMIT_STREAM
from squall.trident.join import join_rows
from squall.trident.operations import (
    BaseAggregator,
    CombinerAggregator,
    ReducerAggregator,
    Report,
    TridentCollector,
    TridentTuple,
)


@dataclass
class OpSpec:
    kind: str  # "each" | "filter" | "project"
    idx: tuple[int, ...]  # input positions (in the full tuple, "$batch" at 0)
    names: tuple[str, ...]  # their field names, for the TridentTuple the function sees
    op: Any = None


@dataclass
class HeadSpec:
    kind: str  # "aggregate" | "state_query" | "join"
    group_idx: tuple[int, ...]
    idx: tuple[int, ...]
    names: tuple[str, ...]
    op: Any
    from_partials: bool = False  # input rows are [batch, *group, partial] from a partial combine
    factory: Any = None


@dataclass
class TailSpec:
    """Per-partition pre-aggregation of a combiner aggregator, per batch and group key."""

    group_idx: tuple[int, ...]
    idx: tuple[int, ...]
    names: tuple[str, ...]
    agg: CombinerAggregator


@dataclass
class Segment:
    head: HeadSpec | None = None
    ops: list[OpSpec] = field(default_factory=list)
    tail: TailSpec | None = None
    out_fields: tuple[str, ...] = ()


def _tt(row: list, spec: Any) -> TridentTuple:
    return TridentTuple([row[i] for i in spec.idx], spec.names)


def run_ops(ops: list[OpSpec], rows: list[list], report: Report | None = None) -> list[list]:
    for op in ops:
        if op.kind == "each":
            out = []
            for r in rows:
                c = TridentCollector(report)
                op.op.execute(_tt(r, op), c)
                out.extend(r + e for e in c.out)
            rows = out
        elif op.kind == "filter":
            rows = [r for r in rows if op.op.is_keep(_tt(r, op))]
        else:
            rows = [[r[i] for i in op.idx] for r in rows]
        if not rows:
            break
    return rows


def aggregate_rows(head: HeadSpec, batch: Any, rows: list[list], report: Report | None = None) -> list[list]:
    """One batch's aggregation in this partition: [batch, *group, *result] rows."""
    groups: dict[tuple, list[list]] = {}
    for r in rows:
        groups.setdefault(tuple(r[i] for i in head.group_idx), []).append(r)
    out = []
    agg = head.op
    for key, members in groups.items():
        if isinstance(agg, CombinerAggregator):
            if head.from_partials:
                vals = [r[-1] for r in members]
            else:
                vals = [agg.init(_tt(r, head)) for r in members]
            out.append([batch, *key, functools.reduce(agg.combine, vals, agg.zero())])
        elif isinstance(agg, ReducerAggregator):
            acc = agg.init()
            for r in members:
                acc = agg.reduce(acc, _tt(r, head))
            out.append([batch, *key, acc])
        else:
            c = TridentCollector(report)
            st = agg.init(batch, c)
            for r in members:
                ret = agg.aggregate(st, _tt(r, head), c)
                if ret is not None:
                    st = ret
            agg.complete(st, c)
            out.extend([batch, *key, *e] for e in c.out)
    return out


def _prepare_ops(objs: list[Any], conf: dict, context: Any) -> None:
    """Each operation's `prepare`, once per task."""
    for o in objs:
        prep = getattr(o, "prepare", None)
        if prep is not None:
            prep(conf, context)


def _cleanup_ops(objs: list[Any]) -> None:
    """Each prepared operation's `cleanup`, as Storm calls it when the topology is killed."""
    for o in objs:
        cleanup = getattr(o, "cleanup", None)
        if cleanup is not None:
            cleanup()


def for_engine(factory: Any, engine: str, conf: dict) -> Any:
    """The state factory as tasks of `engine` use it: a memory state's dict stays in the driver
    on Spark (unless squall.trident.memory.on.spark asks for executor-local dicts, which
    nothing can read back: for benchmarks)."""
    served = getattr(factory, "served_from_driver", None)
    if engine == "spark" and served is not None and not conf.get("squall.trident.memory.on.spark"):
        return served()
    return factory


class ProcessorBolt(Bolt):
    _settles_inputs = False  # Trident batches settle at their commit, in txid order

    def __init__(self, segment: Segment):
        self.segment = segment
        self._ops: list[Any] = []  # the operations prepared, to clean up at the end

    def check_engine(self, engine: str, conf: dict) -> None:
        head = self.segment.head
        if head is not None and head.factory is not None:
            head.factory = for_engine(head.factory, engine, conf)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(list(self.segment.out_fields))

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.c = collector
        seg = self.segment
        self._ops = [o.op for o in seg.ops] + ([seg.head.op] if seg.head else [])
        _prepare_ops(self._ops, conf, context)
        self._where = (dict(conf), context.this_task_index, len(context.component_tasks(context.this_component_id)))
        self.state = None  # made on first use: a state holds a connection, never carried between waves
        self.held: dict[Any, Any] = {}  # batch -> the tuple that keeps its tree open
        self.rows: dict[Any, list[list]] = {}  # batch -> head input rows
        self.partials: dict[Any, dict[tuple, Any]] = {}  # batch -> group -> partial value

    def __getstate__(self) -> dict:
        return {**self.__dict__, "state": None}

    def cleanup(self) -> None:
        _cleanup_ops(self._ops)  # none when the task was never prepared

    def _hold(self, t: Any, batch: Any) -> None:
        if batch in self.held:
            self.c.ack(t)
        else:
            self.held[batch] = t

    def execute(self, t: Any) -> None:
        values = t.values
        batch = values[0]
        seg = self.segment
        if seg.head is not None:
            join = seg.head.kind == "join"
            row = (seg.head.op.side_of(t.source_component, t.source_stream), values) if join else values
            self.rows.setdefault(batch, []).append(row)
            self._hold(t, batch)
            return
        rows = run_ops(seg.ops, [values], self.c.report_error)
        if seg.tail is not None:
            self._combine(batch, rows)
            self._hold(t, batch)
            return
        for r in rows:
            self.c.emit(r, anchors=t)
        self.c.ack(t)

    def _combine(self, batch: Any, rows: list[list]) -> None:
        tail = self.segment.tail
        part = self.partials.setdefault(batch, {})
        agg = tail.agg
        for r in rows:
            key = tuple(r[i] for i in tail.group_idx)
            v = agg.init(_tt(r, tail))
            part[key] = agg.combine(part[key], v) if key in part else v

    def finish_wave(self) -> None:
        seg = self.segment
        failed = set()
        for batch, rows in self.rows.items():
            try:
                out = self._head(batch, rows)
                out = run_ops(seg.ops, out, self.c.report_error)
                if seg.tail is not None:
                    self._combine(batch, out)
                else:
                    held = self.held[batch]
                    for r in out:
                        self.c.emit(r, anchors=held)
            except Exception as e:  # noqa: BLE001 - the batch fails (and is replayed); others go on
                self.c.report_error(e)
                self.c.fail(self.held[batch])
                failed.add(batch)
        self.rows = {}
        for batch, part in self.partials.items():
            if batch in failed:
                continue
            held = self.held[batch]
            for key, v in part.items():
                self.c.emit([batch, *key, v], anchors=held)
        self.partials = {}
        for batch, t in self.held.items():
            if batch not in failed:
                self.c.ack(t)
        self.held = {}

    def _head(self, batch: Any, rows: list[list]) -> list[list]:
        head = self.segment.head
        if head.kind == "aggregate":
            return aggregate_rows(head, batch, rows, self.c.report_error)
        if head.kind == "join":
            return join_rows(head.op, batch, rows)
        tts = [_tt(r, head) for r in rows]
        if self.state is None:
            self.state = head.factory.make_state(*self._where)
        results = head.op.batch_retrieve(self.state, tts)
        out = []
        for r, tt, res in zip(rows, tts, results):
            c = TridentCollector(self.c.report_error)
            head.op.execute(tt, res, c)
            out.extend(r + e for e in c.out)
        return out


@dataclass
class StateSpec:
    factory: Any
    mode: str  # "combine" (partials or raw via init) | "reduce" | "update"
    key_idx: tuple[int, ...]
    idx: tuple[int, ...]
    names: tuple[str, ...]
    op: Any
    from_partials: bool = False
    out_fields: tuple[str, ...] = ()  # set when new_values_stream() is used: "$batch", key..., value


class StateBolt(Bolt):
    """Pending updates per batch; applied at the batch's commit, in txid order."""

    _settles_inputs = False  # Trident batches settle at their commit, in txid order

    def __init__(self, spec: StateSpec):
        self.spec = spec
        self._ops: list[Any] = []  # the operations prepared, to clean up at the end

    def declare_output_fields(self, declarer: Any) -> None:
        if self.spec.out_fields:
            declarer.declare(list(self.spec.out_fields))

    def check_engine(self, engine: str, conf: dict) -> None:
        self.spec.factory = for_engine(self.spec.factory, engine, conf)

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.c = collector
        self._ops = [self.spec.op]
        _prepare_ops(self._ops, conf, context)
        n = len(context.component_tasks(context.this_component_id))
        self._where = (dict(conf), context.this_task_index, n)
        self.state = None  # made on first use: a state holds a connection, never carried between waves
        self.pending: dict[Any, dict[tuple, Any]] = {}
        self.new_values: tuple[int, list[list]] = (0, [])  # the last commit's new values, for a retried commit

    def __getstate__(self) -> dict:
        return {**self.__dict__, "state": None}

    def execute(self, t: Any) -> None:
        if t.source_stream == COMMIT_STREAM:
            rows = self._commit(t[0])
            if self.spec.out_fields:
                batch = tuple(t[0])
                for r in rows:
                    self.c.emit([batch, *r], anchors=t)
            self.c.ack(t)
            return
        values = t.values
        spec = self.spec
        pend = self.pending.setdefault(values[0], {})
        if spec.mode == "update":
            pend.setdefault((), []).append(_tt(values, spec))
        else:
            key = tuple(values[i] for i in spec.key_idx)
            if spec.mode == "combine":
                agg: CombinerAggregator = spec.op
                v = values[-1] if spec.from_partials else agg.init(_tt(values, spec))
                pend[key] = agg.combine(pend[key], v) if key in pend else v
            else:
                pend.setdefault(key, []).append(_tt(values, spec))
        self.c.ack(t)

    def _commit(self, batch: Any) -> list[list]:
        """Apply this batch's updates; returns the new values (key..., value rows). Raising fails
        the commit tuple: the coordinator retries. A retry of a commit that went through (its
        new values' stream failed downstream) gives the same new values again."""
        txid = batch[0]
        if txid == self.new_values[0] and tuple(batch) not in self.pending:
            return self.new_values[1]
        pend = self.pending.get(tuple(batch), {})
        if self.state is None:
            self.state = self.spec.factory.make_state(*self._where)
        state = self.state
        state.begin_commit(txid)
        try:
            rows = self._apply(state, pend)
            state.commit(txid)
        except BaseException:
            abort = getattr(state, "abort", None)
            if abort is not None:
                abort()
            raise
        for b in [b for b in self.pending if b[0] <= txid]:
            del self.pending[b]
        self.new_values = (txid, rows if self.spec.out_fields else [])
        return rows

    def _apply(self, state: Any, pend: dict[tuple, Any]) -> list[list]:
        spec = self.spec
        if spec.mode == "update":
            c = TridentCollector(self.c.report_error)
            spec.op.update_state(state, pend.get((), []), c)
            return c.out
        if not pend:
            return []
        keys = [list(k) for k in pend]
        if spec.mode == "combine":
            ups = [functools.partial(_combine_into, spec.op, v) for v in pend.values()]
        else:
            ups = [functools.partial(_reduce_into, spec.op, ts) for ts in pend.values()]
        new = state.multi_update(keys, ups)
        return [[*k, v] for k, v in zip(keys, new)]

    def cleanup(self) -> None:
        _cleanup_ops(self._ops)  # none when the task was never prepared
        close = getattr(self.state, "close", None) if self.state is not None else None
        if close is not None:
            close()


def _combine_into(agg: CombinerAggregator, partial: Any, old: Any) -> Any:
    return agg.combine(agg.zero() if old is None else old, partial)


def _reduce_into(agg: ReducerAggregator, tuples: list[TridentTuple], old: Any) -> Any:
    acc = agg.init() if old is None else old
    for t in tuples:
        acc = agg.reduce(acc, t)
    return acc


__all__ = ["BaseAggregator", "HeadSpec", "OpSpec", "ProcessorBolt", "Segment", "StateBolt", "StateSpec", "TailSpec"]
