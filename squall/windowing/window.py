"""TupleWindow: what a windowed bolt's `execute` gets. Tuples are made from the store's rows
only when asked for (`get`, `get_new`, `get_expired`), so a large window costs no Tuple objects
unless the bolt reads it."""

from __future__ import annotations

from typing import Any

import numpy as np

from squall.reliability.batch import single_row
from squall.reliability.held import HeldStore, as_run
from squall.reliability.tuple import Tuple


class TupleWindow:
    """The tuples of one window, in arrival order; valid during `execute` only."""

    def __init__(self, store: HeldStore, rows: np.ndarray, new: np.ndarray, expired: np.ndarray,
                 start_ms: int | None, end_ms: int | None):
        self._store = store
        self._rows = rows
        self._new = new
        self._expired = expired
        self.start_timestamp = start_ms
        self.end_timestamp = end_ms
        self._made: dict[int, tuple[Tuple, int]] = {}  # id(Tuple) -> (it, its store row): anchors and fails given back

    def __len__(self) -> int:
        return len(self._rows)

    def get(self) -> list[Tuple]:
        """Every tuple in the window."""
        return self._tuples(self._rows)

    def get_new(self) -> list[Tuple]:
        """The tuples that were not in the previous window."""
        return self._tuples(self._new)

    def get_expired(self) -> list[Tuple]:
        """The tuples that left the window since the previous one."""
        return self._tuples(self._expired)

    def values(self) -> list[list]:
        """Just the values of every tuple in the window (no Tuple objects: cheaper)."""
        return self._values(self._rows)

    def new_values(self) -> list[list]:
        """The values of `get_new()`, without making Tuple objects."""
        return self._values(self._new)

    def expired_values(self) -> list[list]:
        """The values of `get_expired()`, without making Tuple objects."""
        return self._values(self._expired)

    def _values(self, rows: np.ndarray) -> list[list]:
        vals = self._store.values
        run = as_run(rows)
        if run is not None:
            return vals[run[0]:run[1]]
        return [vals[r] for r in rows.tolist()]

    def row_of(self, t: Any) -> int | None:
        """The store row of a Tuple this window made (None: not one of them)."""
        made = self._made.get(id(t))
        return made[1] if made is not None and made[0] is t else None

    def _tuples(self, rows: np.ndarray) -> list[Tuple]:
        s = self._store
        out = []
        for r in rows.tolist():
            comp, stream, fields, task = s.sources[int(s.src[r])]
            a, b = s.off[r], s.off[r + 1]
            t = Tuple(s.values[r], single_row(comp, stream, fields, task, s.values[r], s.root[a:b], s.val[a:b]), 0)
            t._done = 3  # held by the window: acked or failed by it (squall.windowing.collector)
            self._made[id(t)] = (t, r)
            out.append(t)
        return out

    def __repr__(self) -> str:
        return f"TupleWindow({len(self)} tuples, {len(self._new)} new, {len(self._expired)} expired)"
