"""ColumnBatch: a TupleBatch whose values are an Arrow RecordBatch.

It has the TupleBatch interface (source, fields, `anchors_to_ids` as flat arrays, `values`),
so it travels and is consumed like one: a columnar bolt reads its Arrow data as is; an
ordinary bolt reads `values`, built (once, on first use) from the columns. Pickled, the
columns travel as Arrow IPC bytes, not as pickled rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from squall.columnar.arrow import batch_to_rows, from_ipc, rows_to_batch, to_ipc
from squall.reliability.batch import (
    TupleBatch,
    field_index_of,
    is_one_each,
    one_each,
    pack_offsets,
    pack_roots,
    pack_runs,
    root_runs,
    unpack_offsets,
    unpack_roots,
)
from squall.reliability.ids import derived_edge_ids

_U64 = np.uint64
_I64 = np.int64


class ColumnBatch:
    """Rows of one (source component, stream, source task) as Arrow columns, with anchors."""

    __slots__ = ("component", "stream", "fields", "source_task", "data", "anc_off", "_root", "_val", "_runs",
                 "anc_derive", "anc_settle", "parts", "_values", "_findex")
    always_crosses = True  # Arrow data always serializes (engine/tasks/sealing.py need not check rows)

    def __init__(self, component: str, stream: str, fields: tuple[str, ...], source_task: int, data: pa.RecordBatch,
                 anc_off: np.ndarray | None = None, anc_root: np.ndarray | None = None,
                 anc_val: np.ndarray | None = None):
        self.component = component
        self.stream = stream
        self.fields = tuple(fields)
        self.source_task = source_task
        self.data = data
        self.anc_off = anc_off
        self._root = anc_root
        self._val = anc_val
        # roots as (run roots, run lengths), expanded only when a row's roots are needed (a row
        # fails or has children anchored to it): what a settled batch's rows bring (a sentence's
        # words share its root); anc_root and anc_val are then made on first use
        self._runs: tuple[np.ndarray, np.ndarray] | None = None
        # the salt of derived edge values (reliability/columns.py): pickled, they are left out and
        # made again from the roots (8 bytes a row less to shuffle); None: they travel
        self.anc_derive: int | None = None
        # the batch's id when it goes to a task that settles it whole (reliability/settled.py):
        # pickled, its edge values do not travel (the receiver sees zeros; a spout's stay on the
        # driver, which acks them once the batch is settled)
        self.anc_settle: int | None = None
        self.parts: list[tuple[int | None, int]] | None = None  # a concatenation's (row_parts)
        self._values: list | None = None
        self._findex = field_index_of(self.fields)

    def __len__(self) -> int:
        return self.data.num_rows

    @property
    def anc_root(self) -> np.ndarray | None:
        if self._root is None and self._runs is not None:
            self._root = np.repeat(*self._runs)
        return self._root

    @anc_root.setter
    def anc_root(self, roots: np.ndarray | None) -> None:
        self._root, self._runs = roots, None

    @property
    def anc_val(self) -> np.ndarray | None:
        if self._val is None and self.anc_off is not None and self.settled:
            self._val = np.zeros(int(self.anc_off[-1]), _U64)  # a settled batch's edge values did not travel: 0
        return self._val

    @anc_val.setter
    def anc_val(self, vals: np.ndarray | None) -> None:
        self._val = vals

    @property
    def settled(self) -> bool:
        """Every row is of a batch that settles whole (no edge values: reliability/settled.py)."""
        return all(settle is not None for settle, _ in self.row_parts())

    @property
    def tracked_rows(self) -> bool:
        """Whether any row has a root (without expanding roots kept as runs)."""
        return self.anc_off is not None and int(self.anc_off[-1]) > 0

    @property
    def values(self) -> list:
        """The rows as lists, for ordinary bolts (built on first use)."""
        if self._values is None:
            self._values = batch_to_rows(self.data)
        return self._values

    @property
    def field_index(self) -> dict[str, int]:
        return self._findex

    anchors_of = TupleBatch.anchors_of  # the same flat anchor arrays as a TupleBatch
    row_batch = TupleBatch.row_batch

    def row_values(self, row: int) -> list:
        return self.values[row]

    def __getstate__(self) -> tuple:
        vals = self.anc_val if self.anc_derive is None and self.anc_settle is None else None
        roots = pack_runs(*self._runs) if self._root is None and self._runs is not None else pack_roots(self.anc_root)
        return (self.component, self.stream, self.fields, self.source_task, to_ipc(self.data),
                pack_offsets(self.anc_off), roots, vals, self.anc_derive, self.anc_settle)

    def __setstate__(self, state: tuple) -> None:
        (self.component, self.stream, self.fields, self.source_task, blob,
         off, roots, self._val, self.anc_derive, self.anc_settle) = state
        self.anc_off = unpack_offsets(off)
        self._root = self._runs = None
        if self.anc_settle is not None and self.anc_derive is None and root_runs(roots) is not None:
            self._runs = root_runs(roots)  # expanded when needed (anc_root); values all 0 (anc_val)
        else:
            self._root = unpack_roots(roots)
        if self.anc_derive is not None:
            self._val = derived_edge_ids(self._root, self.anc_derive)
        self.data = from_ipc(blob)
        self.parts = None
        self._values = None
        self._findex = field_index_of(self.fields)

    def row_parts(self) -> list[tuple[int | None, int]]:
        """(settle id, rows) of each batch this one was concatenated from, in row order."""
        return self.parts if self.parts is not None else [(self.anc_settle, len(self))]

    def __repr__(self) -> str:
        return f"ColumnBatch({self.component}:{self.stream} from task {self.source_task}, {len(self)} rows)"


def as_columns(batch: Any) -> ColumnBatch:
    """Any input batch as a ColumnBatch (a TupleBatch's rows become columns; may raise TypeError)."""
    if type(batch) is ColumnBatch:
        return batch
    data = rows_to_batch(batch.values, batch.fields)
    out = ColumnBatch(batch.component, batch.stream, batch.fields, batch.source_task, data,
                      batch.anc_off, batch.anc_root, batch.anc_val)
    out.anc_settle = batch.anc_settle
    return out


def concat(parts: Sequence[ColumnBatch]) -> ColumnBatch:
    """Batches of one source stream as one (rows in order, anchors shifted); the source task is
    the first part's (-1 when parts come from several tasks)."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    schema = first.data.schema
    tables = [p.data if p.data.schema.equals(schema) else p.data.cast(schema) for p in parts]
    data = pa.Table.from_batches(tables).combine_chunks()
    data = data.to_batches()[0] if data.num_rows else first.data.slice(0, 0)
    tasks = {p.source_task for p in parts}
    out = ColumnBatch(first.component, first.stream, first.fields, first.source_task if len(tasks) == 1 else -1, data)
    if any(p.anc_off is not None for p in parts):
        out.anc_off = _concat_offsets(parts)
        tracked = [p for p in parts if p.anc_off is not None]
        if all(p._runs is not None for p in tracked):  # settled parts' runs: concatenated as runs
            out._runs = (np.concatenate([p._runs[0] for p in tracked]), np.concatenate([p._runs[1] for p in tracked]))
        else:
            out.anc_root = np.concatenate([p.anc_root for p in tracked]).astype(_U64, copy=False)
            if all(p.anc_settle is not None for p in tracked):  # no edge values: zeros, with no copying
                out.anc_val = np.zeros(len(out.anc_root), _U64)
            else:
                out.anc_val = np.concatenate([p.anc_val for p in tracked]).astype(_U64, copy=False)
    out.parts = [part for p in parts for part in p.row_parts()]
    return out


def _concat_offsets(parts: Sequence[ColumnBatch]) -> np.ndarray:
    """The parts' anchor offsets as one array: each part's shifted by the entries before it, an
    untracked part's rows owning none (one pass per part)."""
    if all(p.anc_off is not None and is_one_each(p.anc_off) for p in parts):
        return one_each(sum(map(len, parts)))
    offs, shift = [], 0
    for p in parts:
        if p.anc_off is None:
            offs.append(np.full(len(p), shift, _I64))
        else:
            offs.append(p.anc_off[:-1] + shift)
            shift += int(p.anc_off[-1])
    offs.append(np.array([shift], _I64))
    return np.concatenate(offs)
