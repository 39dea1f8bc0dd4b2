"""A spout's column emits (`emit_batch(columns, msg_ids)`) become output batches and trees:
a root per row with a msg id (or one root for a whole batch given one `msg_id`), one edge per
child, init values XORed per root, children grouped on the columns. No per-row Python work but
the msg ids themselves."""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from squall.columnar.arrow import batch_to_rows
from squall.columnar.outputs import column_children
from squall.columnar.routing import ColumnRoute, route_columns
from squall.reliability.columns import spout_row_trees

_I64 = np.int64
_U64 = np.uint64


class RowRef:
    """A row of a column emit, kept for a possible dead letter: a list only if one is written."""

    __slots__ = ("data", "i")

    def __init__(self, data: Any, i: int):
        self.data, self.i = data, i

    def as_list(self) -> list:
        return batch_to_rows(self.data.slice(self.i, 1))[0]

    def __repr__(self) -> str:
        return repr(self.as_list())


class ColumnTrees(NamedTuple):
    """What a spout task's column emits of one wave became."""

    outputs: list[tuple[int, Any]]
    rows: int
    msg_ids: list
    roots: list[np.ndarray]
    init_vals: list[np.ndarray]
    values: list  # per tracked root, its first row (a RowRef: what a dead letter shows)


def column_trees(component: str, task_id: int, emits: list[tuple], routes: dict[str, list[ColumnRoute]],
                 roots_for: Callable[[int], np.ndarray], tracking: bool) -> ColumnTrees:
    """Output batches, msg ids, roots and init values of a spout task's column emits of a wave
    (emits: (stream out, RecordBatch, msg id per row or None, SharedRoot or None))."""
    out = ColumnTrees([], 0, [], [], [], [])
    for so, data, ids, shared in emits:
        m = data.num_rows
        child_row, child_target = route_columns(routes[so.stream], data)
        trees = None
        if shared is not None:
            out.msg_ids.append(shared.msg_id)
            if tracking:
                roots = roots_for(1)
                trees = spout_row_trees(np.full(m, roots[0], _U64), np.arange(m), child_row, child_target,
                                        np.zeros(m, _I64), 1)
                out.values.append(RowRef(data, 0) if m else [])
        elif ids is not None:
            out.msg_ids.extend(ids)
            if tracking:
                roots = roots_for(m)
                trees = spout_row_trees(roots, np.zeros(m, _I64), child_row, child_target, np.arange(m), m)
                out.values.extend(map(RowRef, repeat(data, m), range(m)))
        if trees is not None:
            out.roots.append(roots)
            out.init_vals.append(trees[1])
        out.outputs.extend(column_children(component, task_id, so, data, child_row, child_target,
                                           trees[0] if trees is not None else None))
        out = out._replace(rows=out.rows + m)
    return out
