"""Groupings on columns: for a batch of output rows of one stream, every child (row, target
task), computed with numpy and giving the same tasks as the tuple path (routing/tuples.py).

Shuffle continues the tuple path's own round-robin counter (shared with it, and carried
across waves with the task), so mixing tuple and batch emits keeps the rotation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from squall.api.streams import StreamOut
from squall.api.topology import StormTopology
from squall.routing.hashing import fields_hashes
from squall.routing.tuples import ShuffleCounter

_I64 = np.int64
_EMPTY = np.zeros(0, _I64)


class ColumnRoute:
    """One subscription of a stream, vectorized."""

    def __init__(self, kind: str, tasks: list[int], key_idx: list[int], counter: ShuffleCounter | None,
                 same: int | None):
        self.kind = kind
        self.tasks = np.asarray(tasks, _I64)
        self.key_idx = key_idx
        self.counter = counter
        self.same = same

    def children(self, data: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
        """(row, target task) of each child, grouped by target task."""
        m = data.num_rows
        rows = np.arange(m)
        if self.same is not None:
            return rows, np.full(m, self.same, _I64)
        if self.kind == "global":
            return rows, np.full(m, self.tasks[0], _I64)
        if self.kind == "all":
            k = len(self.tasks)
            return np.tile(rows, k), np.repeat(self.tasks, m)
        if self.counter is not None:
            pos = self.counter.positions(m)
        elif self.kind == "fields":
            pos = fields_hashes(data, self.key_idx) % len(self.tasks)
        else:
            raise ValueError(f"grouping {self.kind!r} has no vectorized route")
        return by_target(pos, self.tasks)


def by_target(pos: np.ndarray, tasks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by target (stable), O(rows): one pass per target when there are few (faster
    than a sort), else a radix sort over small task positions."""
    if len(tasks) <= 8:
        order = np.concatenate([np.flatnonzero(pos == k) for k in range(len(tasks))])
        return order, tasks[pos[order]]
    small = pos.astype(np.uint8 if len(tasks) <= 256 else np.uint16 if len(tasks) <= 65536 else np.int64)
    order = np.argsort(small, kind="stable")
    return order, tasks[pos[order]]


def stream_column_routes(topology: StormTopology, so: StreamOut, producer_index: int) -> list[ColumnRoute]:
    """The vectorized routes of one output stream (direct subscriptions have none: the emitter
    names the task)."""
    subs = topology.subscribers.get((so.component, so.stream), [])
    out = []
    for (sub, grouping), (_, route) in zip(subs, so.routes):
        tasks = topology.task_ids[sub]
        kind = grouping.kind
        if kind == "direct":
            continue
        counter = route if isinstance(route, ShuffleCounter) else None
        same = tasks[producer_index] if kind == "local_or_shuffle" and counter is None else None
        key_idx = [list(so.fields).index(f) for f in grouping.fields] if kind == "fields" else []
        out.append(ColumnRoute(kind, tasks, key_idx, counter, same))
    return out


def route_columns(routes: list[ColumnRoute], data: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray]:
    """(row, target) of every child of the batch over all of a stream's routes."""
    if not routes or not data.num_rows:
        return _EMPTY, _EMPTY
    if len(routes) == 1:
        return routes[0].children(data)
    parts = [r.children(data) for r in routes]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def direct_children(tasks: Any, n: int, so: StreamOut) -> tuple[np.ndarray, np.ndarray]:
    """emit_direct_batch: the task of each row, checked against the direct subscribers."""
    t = np.asarray(tasks, _I64).reshape(-1)
    if len(t) != n:
        raise ValueError(f"component {so.component!r}: emit_direct_batch got {len(t)} task(s) for {n} row(s)")
    bad = set(np.unique(t).tolist()) - so.direct_tasks
    if bad:
        raise ValueError(f"component {so.component!r}: emit_direct_batch to task(s) {sorted(bad)}, which do not "
                         f"subscribe to stream {so.stream!r} with direct grouping; subscribed: "
                         f"{sorted(so.direct_tasks)}")
    order = np.argsort(t, kind="stable")
    return order, t[order]
