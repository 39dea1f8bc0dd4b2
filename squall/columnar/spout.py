"""A spout's column emits (`emit_batch(columns, msg_ids)`) become output batches and trees:
a root per row with a msg id (or one root for a whole batch given one `msg_id`), one edge per
child, init values XORed per root, children grouped on the columns. No per-row Python work but
the msg ids themselves."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Container, Iterator, Sequence
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from squall.columnar.arrow import batch_to_rows
from squall.columnar.outputs import column_children
from squall.reliability.columns import spout_row_trees
from squall.reliability.ids import mix64_int
from squall.routing.columns import ColumnRoute, route_columns

_I64 = np.int64
_U64 = np.uint64
SPOUT_SALT = 0x5B0_7ED6E  # a spout task's derived edges: salted apart from bolt tasks' execute salts


class RowRef:
    """A row of a column emit, kept for a possible dead letter: a list only if one is written."""

    __slots__ = ("data", "i")

    def __init__(self, data: Any, i: int):
        self.data, self.i = data, i

    def as_list(self) -> list:
        rows = batch_to_rows(self.data.slice(self.i, 1))
        return rows[0] if rows else []  # an empty batch under one msg id: no row to show

    def __repr__(self) -> str:
        return repr(self.as_list())


class RowRefs(Sequence):
    """Per tracked root of a wave's column emits, its first row: a RowRef made only when one is
    looked at (a lost wave's dead letters), not one per row every wave."""

    def __init__(self) -> None:
        self._parts: list[tuple[Any, int]] = []  # (RecordBatch, rows: one per row, or 1 for a shared root)
        self._ends: list[int] = []

    def add(self, data: Any, n: int) -> None:
        self._parts.append((data, n))
        self._ends.append(len(self) + n)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __getitem__(self, i: int) -> RowRef:  # type: ignore[override]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        k = bisect_right(self._ends, i)
        return RowRef(self._parts[k][0], i - (self._ends[k - 1] if k else 0))

    def __iter__(self) -> Iterator[RowRef]:
        for data, n in self._parts:
            yield from map(RowRef, repeat(data, n), range(n))


class ColumnTrees(NamedTuple):
    """What a spout task's column emits of one wave became."""

    outputs: list[tuple[int, Any]]
    rows: int
    msg_ids: list
    roots: list[np.ndarray]
    init_vals: list[np.ndarray]
    values: RowRefs  # per tracked root, its first row (what a dead letter shows)


def column_trees(component: str, task_id: int, emits: list[tuple], routes: dict[str, list[ColumnRoute]],
                 roots_for: Callable[[int], np.ndarray], tracking: bool,
                 settling: Container[int] = ()) -> ColumnTrees:
    """Output batches, msg ids, roots and init values of a spout task's column emits of a wave
    (emits: (stream out, RecordBatch, msg id per row or None, SharedRoot or None)). A batch to a
    task in `settling` has no edges, where they are derived (reliability/settled.py)."""
    out = ColumnTrees([], 0, [], [], [], RowRefs())
    task_salt = mix64_int(task_id ^ SPOUT_SALT)
    for so, data, ids, shared in emits:
        m = data.num_rows
        child_row, child_target = route_columns(routes[so.stream], data)
        trees = None
        salt = (task_salt, out.rows)  # roots are new in every wave: the task and emit tell edges apart
        if shared is not None:
            out.msg_ids.append(shared.msg_id)
            if tracking:
                roots = roots_for(1)
                trees = spout_row_trees(np.full(m, roots[0], _U64), np.arange(m), child_row, child_target,
                                        np.zeros(m, _I64), 1, salt, settling)
                out.values.add(data, 1)
        elif ids is not None:
            out.msg_ids.extend(ids)
            if tracking:
                roots = roots_for(m)
                trees = spout_row_trees(roots, np.zeros(m, _I64), child_row, child_target, np.arange(m), m, salt,
                                        settling)
                out.values.add(data, m)
        if trees is not None:
            out.roots.append(roots)
            out.init_vals.append(trees[1])
        anchors, derive = (trees[0], trees[2]) if trees is not None else (None, None)
        settle = [t for t in derive if t in settling] if derive else ()
        out.outputs.extend(column_children(component, task_id, so, data, child_row, child_target, anchors, derive,
                                           settle))
        out = out._replace(rows=out.rows + m)
    return out
