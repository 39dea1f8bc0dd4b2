"""TupleBatch: the columnar unit that moves between tasks (in-process or through Spark).

A batch holds tuples of one (source component, source stream, source task): their values and,
for tracked tuples, their `anchors_to_ids` as flat arrays (row i owns entries
anc_off[i]:anc_off[i+1] of anc_root/anc_val). Keeping anchors as numpy arrays lets the runner
compute ids and acks for a whole batch at once, and pickles compactly.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import numpy as np

_U64 = np.uint64
_FIELD_INDEX: dict[tuple[str, ...], dict[str, int]] = {}
_first = itemgetter(0)


def field_index_of(fields: tuple[str, ...]) -> dict[str, int]:
    """name -> position, shared by every batch with the same fields (built once)."""
    fi = _FIELD_INDEX.get(fields)
    if fi is None:
        fi = _FIELD_INDEX[fields] = {f: i for i, f in enumerate(fields)}
    return fi


_ONE_EACH = np.zeros(1, np.int64)  # 0, 1, 2, ...: grown on demand, read-only, shared by every batch


def one_each(n: int) -> np.ndarray:
    """Anchor offsets 0..n (every row owns one entry, what a split or a column emit makes) as a
    read-only view of one shared array: not 8 bytes a row written (and compared) per batch."""
    global _ONE_EACH
    if len(_ONE_EACH) < n + 1:
        grown = np.arange(max(n + 1, 2 * len(_ONE_EACH)), dtype=np.int64)
        grown.flags.writeable = False
        _ONE_EACH = grown
    return _ONE_EACH[:n + 1]


def is_one_each(off: np.ndarray) -> bool:
    """Offsets 0..n, every row owning one entry: at once for `one_each`'s views, else by a pass."""
    if off.base is _ONE_EACH and off.strides == (8,) and len(off) and off[0] == 0:
        return True
    return int(off[-1]) == len(off) - 1 and bool((off[1:] > off[:-1]).all())


def pack_offsets(off: np.ndarray | None) -> np.ndarray | int | None:
    """Anchor offsets as they travel: when every row has exactly one anchor (what a split or a
    columnar emit makes), just the row count instead of n + 1 int64s (a third of a tracked
    batch's anchor bytes)."""
    if off is not None and len(off) > 1 and is_one_each(off):
        return len(off) - 1
    return off


def unpack_offsets(off: np.ndarray | int | None) -> np.ndarray | None:
    return one_each(off) if type(off) is int else off


def pack_values(values: list, nfields: int) -> list | tuple:
    """Rows as they travel: a one-field stream's rows (a word count's words) as one flat list in
    a tuple, so unpickling makes no list per row."""
    if nfields == 1 and len(values) >= 64 and set(map(len, values)) == {1}:
        return (list(map(_first, values)),)
    return values if type(values) is not tuple else list(values)  # a tuple means packed


def run_starts(a: np.ndarray) -> np.ndarray:
    """Where each run of equal neighbours in `a` starts (a non-empty array)."""
    return np.flatnonzero(np.concatenate(([True], a[1:] != a[:-1])))


def pack_roots(roots: np.ndarray | None) -> np.ndarray | tuple | None:
    """Anchor roots as they travel: run-length coded when runs are long (the rows a sentence
    splits into share its root and sit together in a batch), the run roots and lengths then in
    small steps (`pack_steps`); else, in order with small steps (a spout's consecutive roots),
    as steps; else as they are."""
    if roots is None or len(roots) < 64:
        return roots
    starts = run_starts(roots)
    if 3 * len(starts) > len(roots):  # runs shorter than 3: coding them would save little
        return pack_steps(roots)
    lengths = np.diff(np.append(starts, len(roots)))
    return pack_steps(roots[starts]), lengths.astype(_smallest_uint(int(lengths.max())))


def pack_runs(run_roots: np.ndarray, lengths: np.ndarray) -> tuple:
    """Roots kept as runs (`root_runs`) packed as `pack_roots` packs run-length coded roots."""
    top = int(lengths.max()) if len(lengths) else 0
    return pack_steps(run_roots), lengths.astype(_smallest_uint(top))


def root_runs(roots: np.ndarray | tuple | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(run roots, run lengths) of roots packed as runs (`pack_roots`), or None when they
    were not: what a receiver may keep instead of a root per row."""
    if type(roots) is not tuple or type(roots[0]) is int:
        return None
    return unpack_steps(roots[0]), roots[1]


def unpack_roots(roots: np.ndarray | tuple | None) -> np.ndarray | None:
    if type(roots) is not tuple:
        return roots
    if type(roots[0]) is int:
        return unpack_steps(roots)
    return np.repeat(unpack_steps(roots[0]), roots[1])


def pack_steps(ids: np.ndarray) -> np.ndarray | tuple[int, np.ndarray | int]:
    """Ids (uint64) in order with steps below 65,536 (root ids are handed out consecutively) as
    (first, steps as uint8 or uint16): 1 or 2 bytes an id instead of 8; consecutive ids (a
    spout's roots of a wave) as (first, how many). Else as they are."""
    if len(ids) < 64 or ids.dtype != np.uint64:
        return ids
    steps = np.diff(ids)  # a step down wraps to a huge uint64: not small
    top = int(steps.max())
    if top >= 1 << 16:
        return ids
    if top == 1 and (int(ids[-1]) - int(ids[0])) % (1 << 64) == len(ids) - 1:  # every step 1
        return int(ids[0]), len(ids)
    return int(ids[0]), steps.astype(_smallest_uint(top))


def unpack_steps(packed: np.ndarray | tuple[int, np.ndarray | int]) -> np.ndarray:
    if type(packed) is not tuple:
        return packed
    first, steps = packed
    if type(steps) is int:
        return np.arange(steps, dtype=np.uint64) + np.uint64(first)
    out = np.empty(len(steps) + 1, np.uint64)
    out[0] = first
    np.cumsum(steps, dtype=np.uint64, out=out[1:])
    out[1:] += np.uint64(first)
    return out


def _smallest_uint(top: int) -> type:
    return np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.uint32 if top < 1 << 32 else np.uint64


class TupleBatch:
    __slots__ = ("component", "stream", "fields", "source_task", "_rows", "flat", "anc_off", "anc_root", "anc_val",
                 "anc_settle", "_findex")

    def __init__(self, component: str, stream: str, fields: tuple[str, ...], source_task: int, values: list,
                 anc_off: np.ndarray | None = None, anc_root: np.ndarray | None = None,
                 anc_val: np.ndarray | None = None):
        self.component = component
        self.stream = stream
        self.fields = fields
        self.source_task = source_task
        self._rows: list | None = values
        # a one-field batch that travelled packed keeps its rows as plain values (`values` makes
        # the lists on first use): Tuples read them as they are (squall.reliability.tuple.tuples_of),
        # with no list made per row
        self.flat: list | None = None
        self.anc_off = anc_off  # None: no row is tracked
        self.anc_root = anc_root
        self.anc_val = anc_val
        self.anc_settle: int | None = None  # its id when its target settles it whole (reliability/settled.py)
        self._findex = field_index_of(fields)

    @property
    def values(self) -> list:
        """The rows, a list of values each."""
        if self._rows is None:
            self._rows = [[v] for v in self.flat]
        return self._rows

    @values.setter
    def values(self, rows: list) -> None:
        self._rows, self.flat = rows, None

    def __len__(self) -> int:
        return len(self._rows) if self._rows is not None else len(self.flat)

    @property
    def field_index(self) -> dict[str, int]:
        return self._findex

    def anchors_of(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        if self.anc_off is None:
            return np.zeros(0, _U64), np.zeros(0, _U64)
        a, b = self.anc_off[row], self.anc_off[row + 1]
        return self.anc_root[a:b], self.anc_val[a:b]

    def row_batch(self, row: int) -> TupleBatch:
        """Row `row` alone, with its anchors: what a tuple held across batches keeps."""
        roots, vals = self.anchors_of(row)
        return single_row(self.component, self.stream, self.fields, self.source_task, self.row_values(row), roots,
                          vals)

    def row_values(self, row: int) -> list:
        """Row `row`'s values (a list), without making every row's list of a flat batch."""
        return self._rows[row] if self._rows is not None else [self.flat[row]]

    def __getstate__(self) -> tuple:
        values = (self.flat,) if self._rows is None else pack_values(self._rows, len(self.fields))
        return (self.component, self.stream, self.fields, self.source_task, values,
                pack_offsets(self.anc_off), pack_roots(self.anc_root),
                self.anc_val if self.anc_settle is None else None, self.anc_settle)

    def __setstate__(self, state: tuple) -> None:
        (self.component, self.stream, self.fields, self.source_task, values,
         off, roots, self.anc_val, self.anc_settle) = state
        if type(values) is tuple:  # packed one-field rows: kept flat (see __init__)
            self._rows, self.flat = None, values[0]
        else:
            self._rows, self.flat = values, None
        self.anc_off = unpack_offsets(off)
        self.anc_root = unpack_roots(roots)
        if self.anc_settle is not None:  # no edge values travelled: they are all 0
            self.anc_val = np.zeros(len(self.anc_root), _U64)
        self._findex = field_index_of(self.fields)

    def __repr__(self) -> str:
        return f"TupleBatch({self.component}:{self.stream} from task {self.source_task}, {len(self)} rows)"


def single_row(component: str, stream: str, fields: tuple[str, ...], source_task: int, values: Any,
               roots: np.ndarray, vals: np.ndarray) -> TupleBatch:
    off = np.array([0, len(roots)], np.int64)
    return TupleBatch(component, stream, fields, source_task, [values], off, roots.astype(_U64), vals.astype(_U64))


def select_roots(batch: TupleBatch, roots: np.ndarray, keep_untracked: bool) -> TupleBatch | None:
    """The rows of a spout batch whose root is in `roots` (and, if asked, its untracked rows)."""
    if batch.anc_off is None:
        return batch if keep_untracked else None
    counts = np.diff(batch.anc_off)
    row_root = np.zeros(len(batch), _U64)
    has = counts > 0
    row_root[has] = batch.anc_root[batch.anc_off[:-1][has]]
    keep = np.isin(row_root, roots) & has
    if keep_untracked:
        keep |= ~has
    if keep.all():
        return batch
    rows = np.flatnonzero(keep)
    return take_rows(batch, rows) if len(rows) else None


def take_rows(batch: TupleBatch, rows: np.ndarray) -> TupleBatch:
    """A batch of the given rows of `batch` (in that order), with their anchors."""
    values = [batch.values[r] for r in rows.tolist()]
    if batch.anc_off is None:
        return TupleBatch(batch.component, batch.stream, batch.fields, batch.source_task, values)
    counts = np.diff(batch.anc_off)[rows]
    off = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(counts, out=off[1:])
    pos = np.concatenate([np.arange(batch.anc_off[r], batch.anc_off[r + 1]) for r in rows]) if off[-1] else \
        np.zeros(0, np.int64)
    return TupleBatch(batch.component, batch.stream, batch.fields, batch.source_task, values, off,
                      batch.anc_root[pos], batch.anc_val[pos])
