"""A BasicBolt's collector and the executor that runs a BasicBolt as a Bolt: every emit anchored
to the input, the input acked when execute returns, on the lean path with no Tuple kept per row
where the bolt keeps none."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from squall.api.collectors import DROPPED, OutputCollector
from squall.api.components import FailedException, ReportedFailedException
from squall.api.streams import NO_TASKS
from squall.reliability.tuple import RowTuples, Tuple


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
