"""A bolt's collectors. During `execute` they only validate and record; the engine turns the
records into ids, anchors and acks for the whole batch at once afterwards. (The spout's is in
squall.api.spout_collector; the streams and emit checks both share, in squall.api.streams.)"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from squall.api.components import FailedException, ReportedFailedException
from squall.api.rebinding import current_collector
from squall.api.streams import NO_TASKS, StreamOut, checked_emit
from squall.reliability.tuple import RowTuples, Tuple


class LeanEmits(NamedTuple):
    """The lean path's record of a batch's emits (each anchored to the input being executed,
    on a stream with one single-target route): `keys[j] = input row * nbuckets + bucket` of emit
    j, in emit order, and per bucket (a stream's target task: `buckets[b]` is (stream out,
    task id)) its values, in emit order: the children already split by destination. A one-field
    stream's values are kept flat (the value, not its list), as such a batch travels. `others`:
    emit j, row, emit j', row', ... (flat) for emits anchored to another input of the batch too
    (a join's two anchors)."""

    keys: list[int]
    values: list[list]
    buckets: list[tuple[StreamOut, int]]
    others: list[int] = []

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
                 "input_row", "_runner", "_held", "_lean_keys", "_lean_vals", "_lean_others", "_buckets", "_nb",
                 "_batch", "_tuples", "_ack_rows", "_current", "_key")

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
        self._lean_others: list[int] = []  # emit, other row, emit, other row, ... (LeanEmits.others)
        self._batch: Any = None  # the batch being executed, and its Tuples (begin_batch)
        self._tuples: Sequence[Tuple] = []
        self._ack_rows: list[int] = []

    def begin_batch(self, batch: Any, tuples: Sequence[Tuple]) -> None:
        """The runner is about to execute `tuples` (the rows of `batch`, or a RowTuples that makes
        them when asked): emits anchored to the one being executed may take the lean path."""
        self._batch = batch
        self._tuples = tuples

    def track_held(self, store: Any) -> None:
        """A store of held rows (squall.reliability.held) had rows acked, failed or dropped:
        the engine settles them at the end of this batch, after the batch's edges."""
        if not any(s is store for s in self._held):
            self._held.append(store)

    def take_recorded(self) -> Recorded:
        """Hand over (and forget) what was recorded: the engine turns it into ids and acks in bulk."""
        lean = None
        if self._lean_keys:
            lean = LeanEmits(self._lean_keys, self._lean_vals, self._buckets, self._lean_others)
            self._lean_keys, self._lean_vals, self._lean_others = [], [[] for _ in self._buckets], []
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
        flat = self._lean_others
        others = dict(zip(flat[::2], flat[1::2], strict=True))
        emits = self._emits
        for j, k in enumerate(keys):
            row, b = divmod(k, nb)
            so, task = self._buckets[b]
            values = nexts[b]()
            other = others.get(j)
            anchors = tuples[row] if other is None else (tuples[row], tuples[other])
            emits.append((so, [values] if so.nfields == 1 else values, anchors, [task], row))
        self._lean_keys, self._lean_vals, self._lean_others = [], [[] for _ in self._buckets], []

    def fail_with_reason(self, tuple: Tuple, reason: Any) -> None:  # noqa: A002
        """The engine's fail: an input whose execute raised fails with the error as its reason."""
        if tuple._done == 0:
            tuple._done = 2
            self._fails.append((tuple, reason))

    def __reduce__(self) -> tuple:
        return (current_collector, ())

    def emit(self, values: list, anchors: Tuple | Sequence[Tuple] | None = None, stream: str = "default") -> list[int]:
        so = self._streams.get(stream)
        if so is None or type(values) is not list or len(values) != so.nfields or so.direct:
            values = checked_emit(so, values, self._streams, self._component, stream)  # or says what is wrong
        cur = self._current
        if anchors is not cur and (type(anchors) is list or type(anchors) is tuple) and len(anchors) == 1 \
                and anchors[0] is cur:
            anchors = cur  # Storm's own `anchors=[t]`: one anchor, the lean path's
        b = so.bucket
        key = -1  # the lean path's key of this emit's input row (row * lean buckets), if it may take it
        if anchors is cur and not cur._done:  # anchored to the input being executed (only)
            if b >= 0 and not self._emits:
                key = self._key
        elif b >= 0 and (type(anchors) is list or type(anchors) is tuple) and len(anchors) == 2 \
                and (anchors[0] is cur or anchors[1] is cur) and not cur._done and not self._emits:
            other = anchors[1] if anchors[0] is cur else anchors[0]  # a join's: and another input of the batch?
            if type(other) is Tuple and other._b is self._batch and other is not cur and not other._done:
                self._lean_others += (len(self._lean_keys), other._i)
                key = self._key
            else:
                anchors = self._runner.check_anchors(anchors)  # or says what is wrong
        elif anchors is not None:
            anchors = self._runner.check_anchors(anchors)  # or says what is wrong
        if key >= 0:
            cache = so.pick_cache  # a fields grouping's positions by value, looked up here
            v = values[so.pick_index] if cache is not None else None
            p = cache.get(v) if type(v) is str else None
            if p is None:
                p = so.pick(values)
            b += p
            self._lean_keys.append(key + b)
            self._lean_vals[b].append(values[0] if so.nfields == 1 else values)  # one field: flat
            return so.pick_ids[p]
        if b == DROPPED:
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


class BasicOutputCollector:
    """A BasicBolt's collector: every emit is anchored to the current input."""

    __slots__ = ("_out", "input", "_key")

    def __init__(self, out: OutputCollector):
        self._out = out
        self.input: Tuple | None = None
        self._key = -1  # the input's row * buckets when its emits may take the lean path, else -1

    def emit(self, values: list, stream: str = "default") -> list[int]:
        # OutputCollector.emit's lean path and its emits nobody receives, inline: one call less
        out = self._out
        so = out._streams.get(stream)
        if so is not None and type(values) is list and len(values) == (nf := so.nfields):
            b = so.bucket
            if b >= 0:
                k = self._key
                if k >= 0 and not out._emits:
                    cache = so.pick_cache  # a fields grouping's positions by value, looked up here
                    v = values[so.pick_index] if cache is not None else None
                    p = cache.get(v) if type(v) is str else None
                    if p is None:
                        p = so.pick(values)
                    b += p
                    out._lean_keys.append(k + b)
                    out._lean_vals[b].append(values[0] if nf == 1 else values)  # one field: flat
                    return so.pick_ids[p]
            elif b == DROPPED:
                out._unrouted += 1
                return NO_TASKS
        elif so is not None and type(values) is tuple and len(values) == so.nfields:
            return self.emit(list(values), stream)  # Storm's values as a tuple: the lean path all the same
        return out.emit(values, self.input, stream)

    def emit_direct(self, task: int, values: list, stream: str = "default") -> None:
        self._out.emit_direct(task, values, self.input, stream)

    def reset_timeout(self, tuple: Tuple | None = None) -> None:  # noqa: A002
        self._out.reset_timeout(tuple if tuple is not None else self.input)

    def report_error(self, error: BaseException | str) -> None:
        self._out.report_error(error)


class BasicBoltExecutor:
    """Runs a BasicBolt as a Bolt: anchor to the input, ack after execute, fail on FailedException."""

    WRAPS = "basic"  # where the user's bolt is (api/components.user_instance)

    def __init__(self, basic: Any):
        self.basic = basic

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        self._collector = collector
        self._bc = BasicOutputCollector(collector)
        self.basic.prepare(conf, context)

    def execute(self, tuple: Tuple) -> None:  # noqa: A002
        self.execute_all((tuple,), _reraise, self._collector.input_row)

    def execute_all(self, tuples: Sequence[Tuple], on_error: Callable[[Tuple, Exception], None],
                    first_row: int = 0) -> None:
        """`execute` for each tuple (rows first_row, first_row + 1, ...) in one loop: a BasicBolt's
        hot path, a call and an `ack` call less per tuple.
        An exception other than FailedException goes to on_error(tuple, exception)."""
        coll, bc, execute = self._collector, self._bc, self.basic.execute
        acks = coll._acks
        # the inputs' emits may take the lean path when they are the rows of the batch being run
        lean = bool(tuples) and tuples[0]._b is coll._batch and tuples[0]._i == first_row
        nb, base = (coll._nb, 0) if lean else (0, -1)  # base -1: every input's key -1
        for i, t in enumerate(tuples, first_row):
            coll.input_row = i
            bc.input = t
            bc._key = i * nb + base
            try:
                execute(t, bc)
            except Exception as e:  # noqa: BLE001 - FailedException fails it; on_error says what else does
                self._raised(t, e, on_error)
                continue
            if t._done:
                coll.ack(t)  # says it was acked or failed already
            else:
                t._done = 1
                acks.append(t)
        bc.input = None  # not the last input: it would keep its whole batch alive between waves
        bc._key = -1

    def execute_rows(self, batch: Any, on_error: Callable[[Tuple, Exception], None]) -> None:
        """`execute_all` over every row of `batch` (the batch the collector is on), with each
        row's Tuple made as the loop reaches it: a BasicBolt acks its input when execute returns,
        so a Tuple nobody else holds then (no reference beyond the loop's: not kept by the bolt,
        not emitted on the general path, not failed) is the next row's too, its row recorded as
        acked (`Recorded.ack_rows`). One held is left to its holder, acked, and a new one made.
        No tuples_of pass, no object per row, no acks list."""
        coll, bc, execute = self._collector, self._bc, self.basic.execute
        coll.begin_batch(batch, RowTuples(batch, bc))
        ack_rows = coll._ack_rows
        nb = coll._nb
        flat = getattr(batch, "flat", None)
        new = object.__new__
        refs = sys.getrefcount
        t: Tuple | None = None
        alone = 0  # the references to a Tuple nobody else holds: the loop's, bc.input's, refs' own
        for i, v in enumerate(batch.values if flat is None else flat):
            if t is None:
                t = new(Tuple)
                t._b = batch
                t._out = 0
            if flat is None:
                t._values = v
            else:
                t._values = None
                t._v = v
            t._i = i
            t._done = 0
            coll.input_row = i
            bc.input = t
            bc._key = i * nb
            if not alone:
                alone = refs(t)
            try:
                execute(t, bc)
            except Exception as e:  # noqa: BLE001 - failed or on_error's: it stays as it is, a new one next
                self._raised(t, e, on_error)
                t = None
                continue
            if t._done:
                coll.ack(t)  # says it was acked or failed already
                t = None
                continue
            ack_rows.append(i)
            if refs(t) > alone:  # kept: it stays acked, and the next row gets a Tuple of its own
                t._done = 1
                t = None
        bc.input = None  # not the last input: it would keep its whole batch alive between waves
        bc._key = -1

    def _raised(self, t: Tuple, e: Exception, on_error: Callable[[Tuple, Exception], None]) -> None:
        """`execute(t)` raised `e`: a FailedException fails t (reported if it says so); anything
        else goes to on_error."""
        if not isinstance(e, FailedException):
            on_error(t, e)
            return
        if isinstance(e, ReportedFailedException):
            self._collector.report_error(e)
        self._collector.fail(t)

    def cleanup(self) -> None:
        self.basic.cleanup()


def _reraise(_tuple: Tuple, e: Exception) -> None:
    raise e
