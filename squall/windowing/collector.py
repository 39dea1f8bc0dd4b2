"""The collector a windowed bolt gets (Storm's WindowedOutputCollector): an emit without anchors
is anchored to every tuple of the window being executed; the tuples are acked by the window."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from squall.reliability.held import PENDING, HeldRows
from squall.reliability.tuple import Tuple


class WindowedOutputCollector:
    """Wraps the task's OutputCollector for the window being executed (`set_window`)."""

    def __init__(self, out: Any, executor: Any):
        self._out = out
        self._executor = executor  # gives the store and the window being executed

    def _window_anchors(self) -> HeldRows | None:
        w = self._executor.current
        if w is None:
            return None  # outside execute(window): unanchored, as Storm
        store = self._executor.store
        rows = w._rows[store.done[w._rows] == PENDING]
        return HeldRows(store, rows) if len(rows) else None

    def _anchors(self, anchors: Any) -> Any:
        if anchors is None:
            return self._window_anchors()
        w = self._executor.current
        items = (anchors,) if isinstance(anchors, Tuple) else tuple(anchors)
        rows = [w.row_of(a) if w is not None else None for a in items]
        if any(r is None for r in rows):
            raise ValueError(
                f"windowed bolt {self._executor.component!r}: anchors must be tuples of the window being executed "
                "(from window.get()); leave anchors out to anchor to the whole window")
        rows_a = np.unique(np.array(rows, np.int64))
        store = self._executor.store
        rows_a = rows_a[store.done[rows_a] == PENDING]
        return HeldRows(store, rows_a) if len(rows_a) else None

    def emit(self, values: list, anchors: Tuple | Sequence[Tuple] | None = None, stream: str = "default") -> list[int]:
        return self._out.emit(values, self._anchors(anchors), stream)

    def emit_direct(self, task: int, values: list, anchors: Tuple | Sequence[Tuple] | None = None,
                    stream: str = "default") -> None:
        self._out.emit_direct(task, values, self._anchors(anchors), stream)

    def ack(self, tuple: Tuple) -> None:  # noqa: A002
        """Ignored: the window acks its tuples when no later window can contain them."""

    def fail(self, tuple: Tuple) -> None:  # noqa: A002
        """Fail a tuple of the window now (its spout tuple is replayed); it leaves every window."""
        w = self._executor.current
        row = w.row_of(tuple) if w is not None else None
        if row is None:
            raise ValueError(f"windowed bolt {self._executor.component!r}: fail() takes a tuple of the window "
                             "being executed (from window.get())")
        self._executor.fail_rows(np.array([row], np.int64), None)

    def reset_timeout(self, tuple: Tuple) -> None:  # noqa: A002
        """Held tuples are kept alive by the window; nothing to do."""

    def report_error(self, error: BaseException | str) -> None:
        self._out.report_error(error)
