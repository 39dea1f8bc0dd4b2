"""Arrow conversions: rows <-> RecordBatch, and Arrow IPC bytes, the form a columnar batch takes
between tasks (user columns become a batch of the declared fields in api/columns.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa


def rows_to_batch(values: Sequence[Sequence[Any]], fields: Sequence[str]) -> pa.RecordBatch:
    """Tuples' values (a list per row) as a RecordBatch; raises if a field mixes types."""
    n = len(values)
    if not fields:
        return pa.RecordBatch.from_pydict({}, schema=pa.schema([])) if n == 0 else \
            pa.RecordBatch.from_arrays([pa.nulls(n)], names=["_"]).select([])
    cols = list(zip(*values)) if n else [() for _ in fields]
    arrays = []
    for name, col in zip(fields, cols):
        try:
            arrays.append(pa.array(col))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
            raise TypeError(f"field {name!r} cannot be an Arrow column ({e}); a ColumnarBolt's input needs one "
                            "type per field (None allowed)") from e
    return pa.RecordBatch.from_arrays(arrays, names=list(fields))


def batch_to_rows(data: pa.RecordBatch) -> list[list]:
    """The rows of a RecordBatch as Python lists (what ordinary bolts' Tuples hold)."""
    n = data.num_rows
    if data.num_columns == 0:
        return [[] for _ in range(n)]
    return list(map(list, zip(*(c.to_pylist() for c in data.columns))))


def to_ipc(data: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write_batch(data)
    return sink.getvalue().to_pybytes()


def from_ipc(blob: bytes) -> pa.RecordBatch:
    return pa.ipc.open_stream(blob).read_next_batch()


def take(data: pa.RecordBatch, rows: np.ndarray) -> pa.RecordBatch:
    """Rows of `data` in the given order (the batch itself when that is all of it, in order)."""
    if len(rows) == data.num_rows and (len(rows) == 0 or (rows[0] == 0 and (np.diff(rows) == 1).all())):
        return data
    return data.take(pa.array(rows))
