"""Arrow conversions: rows <-> RecordBatch, user columns -> a batch with the declared fields,
and Arrow IPC bytes, the form a columnar batch takes between tasks."""

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


def _array(v: Any, n_hint: int | None) -> pa.Array:
    if isinstance(v, pa.ChunkedArray):
        return v.combine_chunks()
    if isinstance(v, pa.Array):
        return v
    return pa.array(v)


def to_declared(columns: Any, fields: Sequence[str], component: str, stream: str) -> pa.RecordBatch:
    """The user's columns (RecordBatch, Table or dict of arrays) as a RecordBatch with exactly
    the stream's declared fields, in declared order."""
    if isinstance(columns, pa.Table):
        columns = columns.combine_chunks()
        columns = {name: columns.column(name) for name in columns.column_names}
    elif isinstance(columns, pa.RecordBatch):
        columns = {name: columns.column(i) for i, name in enumerate(columns.schema.names)}
    elif not isinstance(columns, dict):
        raise TypeError(f"component {component!r}: emit_batch columns must be a pyarrow.RecordBatch, a Table or a "
                        f"dict of arrays (field -> array), got {type(columns).__name__}")
    if set(columns) != set(fields):
        raise ValueError(f"component {component!r}: emit_batch on stream {stream!r} got columns {sorted(columns)}, "
                         f"but the stream declares fields {list(fields)}; give exactly those")
    arrays = [_array(columns[f], None) for f in fields]
    lens = {len(a) for a in arrays}
    if len(lens) > 1:
        raise ValueError(f"component {component!r}: emit_batch on stream {stream!r}: columns have different "
                         f"lengths {dict(zip(fields, map(len, arrays)))}")
    return pa.RecordBatch.from_arrays(arrays, names=list(fields))


def declared_columns(streams: dict, component: str, stream: str, columns: Any,
                     if_direct: str | None = None) -> tuple[Any, pa.RecordBatch]:
    """(the stream's StreamOut, the columns as its declared fields) for an emit of columns;
    `if_direct`: the error to raise when the stream is declared direct."""
    from squall.api.streams import bad_stream  # noqa: PLC0415

    so = streams.get(stream)
    if so is None:
        raise bad_stream(component, stream, streams)
    if so.direct and if_direct:
        raise ValueError(if_direct)
    return so, to_declared(columns, so.fields, component, stream)


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
