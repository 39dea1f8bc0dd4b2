"""A bolt's collector. During `execute` it only validates and records; the engine turns the
records into ids, anchors and acks for the whole batch at once afterwards. (A BasicBolt's is in
squall.api.basic_bolt, the spout's in squall.api.spout_collector; the streams and emit checks
they share, in squall.api.streams.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from squall.api.rebinding import current_collector
from squall.api.streams import NO_TASKS, StreamOut, checked_emit
from squall.reliability.tuple import Tuple


class LeanEmits(NamedTuple):
    """The lean path's record of a batch's emits (each anchored to the input being executed,
    on a stream with one single-target route): `keys[j] = input row * nbuckets + bucket` of emit
    j, in emit order, and per bucket (a stream's target task: `buckets[b]` is (stream out,
    task id)) its values, in emit order: the children already split by destination. A one-field
    stream's values are kept flat (the value, not its list), as such a batch travels. An emit
    anchored to another input of the batch too (a join's two anchors) has the key
    `~(other row * span + key)`: one int, as every emit has (`others` decodes them)."""

    keys: list[int]
    values: list[list]
    buckets: list[tuple[StreamOut, int]]
    span: int = 0  # more than any key: the batch's rows * nbuckets

    def others(self, keys: np.ndarray) -> np.ndarray:
        """The join emits' pairs, flat (emit j, other row, emit j', other row', ...), from `keys`
        (an array of self.keys), whose join keys become plain ones in place."""
        j = np.flatnonzero(keys < 0)
        if not len(j):
            return j
        other, keys[j] = np.divmod(~keys[j], self.span)
        return np.column_stack([j, other]).ravel()

    def __len__(self) -> int:
        return len(self.keys)


class Recorded(NamedTuple):
    """What a bolt's collector recorded since it was last taken: the engine's input after a batch."""

    emits: list[tuple]  # (stream out, values, anchors, targets, input row)
    acks: list[Tuple]
    fails: list[tuple[Tuple, Any]]  # (tuple, FailReason or None)
    resets: list[Tuple]
    unrouted: int  # emits on streams nobody subscribes to: counted, not recorded (no child, no edge)
    held: list = []  # stores (squall.reliability.held.HeldStore) whose rows were acked or failed
    lean: LeanEmits | None = None  # emits on the lean path (then `emits` is empty)
    ack_rows: list[int] = []  # rows of the batch a BasicBolt acked with no Tuple kept (BasicBoltExecutor.execute_rows)


OUTSIDE = object()  # OutputCollector._current outside an execute: no anchor is it
DROPPED = -2  # StreamOut.bucket of a stream nobody subscribes to: its emits are counted, not recorded


class OutputCollector:
    """A bolt's collector (Storm's OutputCollector).

    Two ways to record an emit. The lean path, for the common emit (anchored to the input being
    executed, and maybe to one more input of the batch, on a stream with one route that picks one
    task, nothing else recorded yet in the batch): an int key and the values appended to the
    target's bucket, so the children leave already split by destination (`LeanEmits`). Any other
    emit takes the general path, a record per emit (`Recorded.emits`); the batch's lean records so
    far become general ones first, so the emit order is kept."""

    __slots__ = ("_component", "_streams", "_emits", "_acks", "_fails", "_resets", "_unrouted", "_record_all",
                 "input_row", "_runner", "_held", "_lean_keys", "_lean_vals", "_span", "_buckets", "_nb",
                 "_batch", "_tuples", "_ack_rows", "_current", "_one", "_key")

    def __init__(self, component: str, streams: dict[str, StreamOut], runner: Any, record_all: bool = False):
        self._component = component
        self._streams = streams
        self._emits: list[tuple] = []  # (stream out, values, anchors, targets, input row)
        self._acks: list[Tuple] = []
        self._fails: list[tuple[Tuple, Any]] = []
        self._resets: list[Tuple] = []
        self._unrouted = 0
        self._record_all = record_all  # record emits nobody receives too (tests capture them, debug logs them)
        self.input_row = -1  # set by the task runner: the row of the input being executed, -1 outside
        self._current: Any = OUTSIDE  # ... and that input, and its row * lean buckets (set with it)
        self._one: list = [OUTSIDE]  # [that input] (set with it): `anchors=[t]` is one C compare to it
        self._key = 0
        self._runner = runner
        self._held: list = []
        self._buckets: list[tuple[StreamOut, int]] = []  # lean bucket -> (stream out, target task id)
        for so in sorted(streams.values(), key=lambda so: so.index):
            if so.pick is not None and not record_all:
                so.bucket = len(self._buckets)
                self._buckets.extend((so, t) for t in so.pick_tasks)
            elif so.unrouted and not so.direct and not record_all:
                so.bucket = DROPPED
        self._nb = len(self._buckets) or 1
        self._lean_keys: list[int] = []
        self._lean_vals: list[list] = [[] for _ in self._buckets]
        self._span = 0  # LeanEmits.span of the batch being executed
        self._batch: Any = None  # the batch being executed, and its Tuples (begin_batch)
        self._tuples: Sequence[Tuple] = []
        self._ack_rows: list[int] = []

    def begin_batch(self, batch: Any, tuples: Sequence[Tuple]) -> None:
        """The runner is about to execute `tuples` (the rows of `batch`, or a RowTuples that makes
        them when asked): emits anchored to the one being executed may take the lean path."""
        self._batch = batch
        self._tuples = tuples
        self._span = len(tuples) * self._nb

    def track_held(self, store: Any) -> None:
        """A store of held rows (squall.reliability.held) had rows acked, failed or dropped:
        the engine settles them at the end of this batch, after the batch's edges."""
        if not any(s is store for s in self._held):
            self._held.append(store)

    def take_recorded(self) -> Recorded:
        """Hand over (and forget) what was recorded: the engine turns it into ids and acks in bulk."""
        lean = None
        if self._lean_keys:
            lean = LeanEmits(self._lean_keys, self._lean_vals, self._buckets, self._span)
            self._lean_keys, self._lean_vals = [], [[] for _ in self._buckets]
        rec = Recorded(self._emits, self._acks, self._fails, self._resets, self._unrouted, self._held, lean,
                       self._ack_rows)
        self._emits, self._acks, self._fails, self._resets, self._unrouted, self._held = [], [], [], [], 0, []
        self._ack_rows = []
        self._batch, self._tuples = None, []
        return rec

    def _lean_to_general(self) -> None:
        """The batch's lean records so far, as general ones (an emit that needs the general path
        comes next: the emit order is kept)."""
        keys, vals, nb, tuples = self._lean_keys, self._lean_vals, self._nb, self._tuples
        nexts = [iter(v).__next__ for v in vals]
        emits = self._emits
        for k in keys:
            other, k = divmod(~k, self._span) if k < 0 else (-1, k)
            row, b = divmod(k, nb)
            so, task = self._buckets[b]
            values = nexts[b]()
            anchors = tuples[row] if other < 0 else (tuples[row], tuples[other])
            emits.append((so, [values] if so.nfields == 1 else values, anchors, [task], row))
        self._lean_keys, self._lean_vals = [], [[] for _ in self._buckets]

    def fail_with_reason(self, tuple: Tuple, reason: Any) -> None:  # noqa: A002
        """The engine's fail: an input whose execute raised fails with the error as its reason."""
        if tuple._done == 0:
            tuple._done = 2
            self._fails.append((tuple, reason))

    def __reduce__(self) -> tuple:
        return (current_collector, ())

    def emit(self, values: list, anchors: Tuple | Sequence[Tuple] | None = None, stream: str = "default") -> list[int]:
        so = self._streams.get(stream)
        cur = self._current
        # the lean path's emits first, in as few steps as they take: anchored to the input being
        # executed only (`anchors=t`, or Storm's own `anchors=[t]`), or to it and another input of
        # the batch (a join's `anchors=[previous, t]`); values checked as they go
        pair = -1
        if anchors is not cur and not (type(anchors) is list and anchors == self._one):
            if type(anchors) is not list and type(anchors) is not tuple or len(anchors) != 2:
                return self._emit(so, values, anchors, stream)
            a, other = anchors  # a join's: the input being executed and another of the batch?
            if other is cur:
                other = a
            elif a is not cur:
                return self._emit(so, values, anchors, stream)
            if type(other) is not Tuple or other._b is not self._batch or other is cur or other._done:
                return self._emit(so, values, anchors, stream)
            pair = other._i
        if so is not None and (b := so.bucket) >= 0 and type(values) is list and len(values) == so.nfields \
                and not cur._done and not self._emits:
            cache = so.pick_cache  # a fields grouping's positions by value, looked up here
            v = values[so.pick_index] if cache is not None else None
            p = cache.get(v) if type(v) is str else None
            if p is None:
                p = so.pick(values)
            b += p
            self._lean_keys.append(self._key + b if pair < 0 else ~(pair * self._span + self._key + b))
            self._lean_vals[b].append(values[0] if so.nfields == 1 else values)  # one field: flat
            return so.pick_ids[p]
        return self._emit(so, values, anchors, stream)

    def _emit(self, so: StreamOut | None, values: Any, anchors: Any, stream: str) -> list[int]:
        """`emit` off the lean path: values checked (or what is wrong said), anchors checked, and
        a record of its own (`Recorded.emits`); an emit the lean path takes once its values are
        normalized (a tuple of values, `anchors=(t,)`) goes back to it."""
        if so is None or type(values) is not list or len(values) != so.nfields or so.direct:
            values = checked_emit(so, values, self._streams, self._component, stream)  # or says what is wrong
            return self.emit(values, anchors, stream)
        cur = self._current
        if anchors is not cur and (type(anchors) is list or type(anchors) is tuple) and len(anchors) == 1 \
                and anchors[0] is cur:
            return self.emit(values, cur, stream)  # as `anchors=t`
        if anchors is not None and (anchors is not cur or cur._done):
            anchors = self._runner.check_anchors(anchors)  # or says what is wrong
        if so.bucket == DROPPED:
            self._unrouted += 1
            return NO_TASKS
        if self._lean_keys:
            self._lean_to_general()
        targets = so.route(values)
        self._emits.append((so, values, anchors, targets, self.input_row))
        return targets

    def emit_direct(self, task: int, values: list, anchors: Tuple | Sequence[Tuple] | None = None,
                    stream: str = "default") -> None:
        so = self._streams.get(stream)
        values = checked_emit(so, values, self._streams, self._component, stream, direct=True)
        if not so.direct:
            raise ValueError(
                f"component {self._component!r}: emit_direct on stream {stream!r}, which is not declared direct "
                f"(declare it with declarer.declare([...], stream={stream!r}, direct=True))"
            )
        if task not in so.direct_tasks:
            raise ValueError(
                f"component {self._component!r}: emit_direct to task {task}, which does not subscribe to stream "
                f"{stream!r} with direct grouping; subscribed tasks: {sorted(so.direct_tasks)}"
            )
        if anchors is not None and (type(anchors) is not Tuple or anchors._done):
            anchors = self._runner.check_anchors(anchors)
        if self._lean_keys:
            self._lean_to_general()
        self._emits.append((so, values, anchors, [task], self.input_row))

    def ack(self, tuple: Tuple) -> None:  # noqa: A002
        if type(tuple) is not Tuple:
            raise TypeError(f"component {self._component!r}: ack() takes an input Tuple, got {tuple!r}")
        if tuple._done:
            self._runner.twice(tuple, "ack")
            return
        tuple._done = 1
        self._acks.append(tuple)

    def fail(self, tuple: Tuple) -> None:  # noqa: A002
        if type(tuple) is not Tuple:
            raise TypeError(f"component {self._component!r}: fail() takes an input Tuple, got {tuple!r}")
        if tuple._done:
            self._runner.twice(tuple, "fail")
            return
        tuple._done = 2
        self._fails.append((tuple, None))

    def reset_timeout(self, tuple: Tuple) -> None:  # noqa: A002
        self._resets.append(tuple)

    def report_error(self, error: BaseException | str) -> None:
        self._runner.report_error(error)
