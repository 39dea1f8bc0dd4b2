"""Columns a component emits (`emit_batch` of Arrow data, from a spout or a columnar bolt):
the user's RecordBatch, Table or dict of arrays checked against the stream's declared fields.
Imported only by code that emits columns, so pyarrow loads only then."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from squall.api.streams import bad_stream


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
    so = streams.get(stream)
    if so is None:
        raise bad_stream(component, stream, streams)
    if so.direct and if_direct:
        raise ValueError(if_direct)
    return so, to_declared(columns, so.fields, component, stream)
