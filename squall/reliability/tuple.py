"""Tuple: one input of a bolt, a view on a row of a TupleBatch."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class MessageId(Mapping[int, int]):
    """Read-only `anchors_to_ids`: root id -> XOR of this tuple's edge ids in that tree."""

    __slots__ = ("_d",)

    def __init__(self, d: dict[int, int]):
        self._d = d

    def __getitem__(self, k: int) -> int:
        return self._d[k]

    def __iter__(self) -> Iterator[int]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{r:#x}: {v:#x}" for r, v in self._d.items()) + "}"


class Tuple:
    """An input tuple. Values by index `t[0]`, by field `t["word"]`, or `t.values`.

    Created by the engine (`tuples_of`), never by users. A tuple is a view on row `_i` of a
    batch `_b` (a `squall.reliability.batch.TupleBatch`: fields, source, `anchors_to_ids`).
    The private slots belong to the reliability rules and are written only there
    (`squall.reliability`): `_done` (0 pending, 1 acked, 2 failed; also set by the collector)
    and `_out` (the XOR of edges anchored to it in earlier batches, while it is held).
    """

    __slots__ = ("_values", "_v", "_b", "_i", "_done", "_out")

    def __init__(self, values: list, batch: Any, row: int):
        self._values = values
        self._b = batch
        self._i = row
        self._done = 0
        self._out = 0

    @property
    def values(self) -> list:
        v = self._values
        if v is None:  # a one-field row read as it travelled (`_v`): its list is made when asked for
            v = self._values = [self._v]
        return v

    @values.setter
    def values(self, values: list) -> None:
        self._values = values

    @property
    def fields(self) -> list[str]:
        return list(self._b.fields)

    def __getitem__(self, key: int | str) -> Any:
        v = self._values
        if v is None:  # a one-field row: its value, no list made
            if key == 0 or key == -1 or (type(key) is str and key == self._b.fields[0]):
                return self._v
            v = self.values
        if type(key) is str:
            i = self._b._findex.get(key)
            return v[self.field_index(key) if i is None else i]
        return v[key]

    def __len__(self) -> int:
        return 1 if self._values is None else len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def field_index(self, name: str) -> int:
        try:
            return self._b._findex[name]
        except KeyError:
            raise KeyError(
                f"tuple from {self._b.component}:{self._b.stream} has no field {name!r}; "
                f"its fields are {list(self._b.fields)}"
            ) from None

    def contains(self, name: str) -> bool:
        return name in self._b._findex

    def get_value(self, i: int) -> Any:
        return self.values[i]

    def get_value_by_field(self, name: str) -> Any:
        return self.values[self.field_index(name)]

    def select(self, fields: list[str]) -> list[Any]:
        return [self.values[self.field_index(f)] for f in fields]

    @property
    def source_component(self) -> str:
        return self._b.component

    @property
    def source_task(self) -> int:
        return self._b.source_task

    @property
    def source_stream(self) -> str:
        return self._b.stream

    @property
    def message_id(self) -> MessageId:
        roots, vals = self._b.anchors_of(self._i)
        return MessageId(dict(zip(roots.tolist(), vals.tolist())))

    def __repr__(self) -> str:
        return f"Tuple({self._b.component}:{self._b.stream} task {self._b.source_task}, {self.values!r})"

    def __reduce__(self) -> tuple:
        # Held across waves (a join, a batch): keep only this row, not the whole batch.
        return (_rebuild, (self.values, self._b.row_batch(self._i), self._done, self._out))


def tuples_of(batch: Any) -> list[Tuple]:
    """One pending Tuple per row of `batch` (the engine's hot path: no __init__ call per row). A
    one-field batch kept flat (`batch.flat`) gives each Tuple its value, with no list made."""
    new = object.__new__
    out = []
    append = out.append
    flat = getattr(batch, "flat", None)
    if flat is not None:
        for i, v in enumerate(flat):
            t = new(Tuple)
            t._values = None
            t._v = v
            t._b = batch
            t._i = i
            t._done = 0
            t._out = 0
            append(t)
        return out
    for i, v in enumerate(batch.values):
        t = new(Tuple)
        t._values = v
        t._b = batch
        t._i = i
        t._done = 0
        t._out = 0
        append(t)
    return out


def row_tuple(batch: Any, i: int, done: int = 0) -> Tuple:
    """A Tuple for row `i` of `batch`, as tuples_of makes it."""
    flat = getattr(batch, "flat", None)
    t = Tuple(None if flat is not None else batch.values[i], batch, i)
    if flat is not None:
        t._v = flat[i]
    t._done = done
    return t


class RowTuples:
    """The Tuples of a batch a BasicBolt runs with no list of them (BasicBoltExecutor.execute_rows):
    row `i`'s when asked for, the one being executed (`holder.input`) or made again, acked if its
    row was executed already."""

    __slots__ = ("_batch", "_holder")

    def __init__(self, batch: Any, holder: Any):
        self._batch = batch
        self._holder = holder

    def __getitem__(self, i: int) -> Tuple:
        t = self._holder.input
        if t is not None and t._i == i:
            return t
        return row_tuple(self._batch, i, 1 if t is None or i < t._i else 0)

    def __len__(self) -> int:
        return len(self._batch)


def _rebuild(values: list, batch: Any, done: int, out: int) -> Tuple:
    t = Tuple(values, batch, 0)
    t._done = done
    t._out = out
    return t
