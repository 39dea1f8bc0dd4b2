"""HeldStore: input tuples a bolt holds for a long time (a window), kept as columns.

A held Tuple object costs several hundred bytes (and its own one-row batch when it crosses a
wave); a window of a million tuples needs less. A store keeps, per row: its values (the list
the bolt received), its source (a small index into a table), its `anchors_to_ids` as flat
arrays (off/root/val, as in a TupleBatch), its out-ack value, an arrival number, a timestamp
and two small flag columns. Acks, fails and anchoring to many rows are numpy operations, and
a whole input batch is taken in at once (`add_batch`) with no Python step per row.

The rules are Storm's, as for a held Tuple: an emit anchored to rows XORs each edge into the
row's out-ack value (bolt_trees.store_anchor_edges), an ack sends `(root, val ^ out)` per root
of the row. Ack and fail only mark rows; the task's flush computes the messages
(bolt_trees.settle_held) after the batch's edges, then `release` drops rows marked gone, so row
positions stay valid until the flush.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from squall.reliability.anchoring import Anchors, ack_messages, expand, keys_of, roots_of_rows

_U64 = np.uint64
_I64 = np.int64
PENDING, ACKED, FAILED = 0, 1, 2


def as_run(rows: np.ndarray) -> tuple[int, int] | None:
    """(a, b) when `rows` is exactly a, a+1, ..., b-1 (a window's rows usually are), so that
    slices can stand in for gathers; else None."""
    n = len(rows)
    if not n or rows[-1] - rows[0] + 1 != n or (n > 1 and (np.diff(rows) != 1).any()):
        return None
    return int(rows[0]), int(rows[-1]) + 1


class HeldRows:
    """Rows of a store (positions, valid until the task's next flush): an emit's anchors."""

    __slots__ = ("store", "rows")

    def __init__(self, store: HeldStore, rows: np.ndarray):
        self.store = store
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)


class HeldStore:
    """Held input rows as columns; see the module docstring."""

    def __init__(self) -> None:
        self.values: list = []
        self.sources: list[tuple] = []  # (component, stream, fields, source task)
        self._source_ix: dict[tuple, int] = {}
        self.src = np.zeros(0, np.int16)
        self.off = np.zeros(1, _I64)
        self.root = np.zeros(0, _U64)
        self.val = np.zeros(0, _U64)
        self.out = np.zeros(0, _U64)
        self.seq = np.zeros(0, _I64)
        self.ts = np.zeros(0, _I64)
        self.done = np.zeros(0, np.uint8)  # PENDING / ACKED / FAILED
        self.flag = np.zeros(0, np.uint8)  # the holder's own bits (a window: "in the last window")
        self.gone = np.zeros(0, bool)  # dropped at the next release
        self._pending: list[tuple[Any, int, int, int]] = []  # (batch, row, seq, ts) not yet columns
        self._floor = 0  # every row below it is gone (a hint for bounded scans; 0 after a release)
        self._keys: np.ndarray | None = None  # row identities (keys_of) of rows 0.., until the next release
        self._acks: list[np.ndarray] = []
        self._fails: list[tuple[np.ndarray, Any]] = []

    def __len__(self) -> int:
        return len(self.values)

    def add(self, t: Any, seq: int, ts: int) -> None:
        """Hold input Tuple `t` (its batch row) from now on; the task no longer holds it itself."""
        self._pending.append((t._b, t._i, seq, ts))
        self.values.append(t.values)
        t._done = 3  # held by a store: the task does not hold it (bolt_trees.hold_pending)

    def add_batch(self, batch: Any, seq0: int, ts: int) -> None:
        """Hold every row of `batch` (a TupleBatch) at once, with arrival numbers seq0+1.. and time
        `ts`: the bulk form of `add`, with no Tuple objects and no Python step per row."""
        self.consolidate()  # rows added one by one before these come first
        n = len(batch)
        if n == 0:
            return
        self.values.extend(batch.values)
        src = np.full(n, self._source(batch), np.int16)
        if batch.anc_off is None:
            ends, root, val = np.zeros(n, _I64), np.zeros(0, _U64), np.zeros(0, _U64)
        else:
            a, b = int(batch.anc_off[0]), int(batch.anc_off[-1])
            ends = batch.anc_off[1:] - a
            root, val = batch.anc_root[a:b], batch.anc_val[a:b]
        self._extend(ends.astype(_I64), root.astype(_U64, copy=False), val.astype(_U64, copy=False), src,
                     np.arange(seq0 + 1, seq0 + n + 1, dtype=_I64), np.full(n, ts, _I64))

    def floor(self, upto: int | None = None) -> int:
        """The first row that is not gone (rows below it are all gone), looking no further than
        `upto`: scans start there, so a window's work is bounded by the rows still held, not by
        every row the store has gathered since the last release."""
        self.consolidate()
        hi = len(self.values) if upto is None else upto
        f = self._floor
        if f < hi and self.gone[f]:
            alive = np.flatnonzero(~self.gone[f:hi])
            f += int(alive[0]) if len(alive) else hi - f
            self._floor = f
        return f

    @property
    def anchors(self) -> Anchors:
        return Anchors(self.off, self.root, self.val)

    def consolidate(self) -> None:
        """Turn rows added since the last call into columns (in bulk, per source batch)."""
        if not self._pending:
            return
        pend, self._pending = self._pending, []
        n = len(pend)
        groups: dict[int, tuple[Any, list[int], list[int]]] = {}
        for i, (b, r, _s, _t) in enumerate(pend):
            g = groups.get(id(b))
            if g is None:
                g = groups[id(b)] = (b, [], [])
            g[1].append(r)
            g[2].append(i)
        counts = np.zeros(n, _I64)
        src = np.zeros(n, np.int16)
        per_root: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (pend indexes, root, val)
        for b, rows, idx in groups.values():
            ix = np.array(idx, _I64)
            src[ix] = self._source(b)
            if b.anc_off is None:
                continue
            r = np.array(rows, _I64)
            c = b.anc_off[r + 1] - b.anc_off[r]
            counts[ix] = c
            grp, pos = expand(b.anc_off[r], c)
            per_root.append((ix[grp], b.anc_root[pos], b.anc_val[pos]))
        self._append_columns(pend, counts, src, per_root)

    def _append_columns(self, pend: list, counts: np.ndarray, src: np.ndarray, per_root: list) -> None:
        n = len(pend)
        off = np.zeros(n + 1, _I64)
        np.cumsum(counts, out=off[1:])
        root = np.zeros(int(off[-1]), _U64)
        val = np.zeros(int(off[-1]), _U64)
        for ix, r, v in per_root:  # within a pend row, entries keep their batch order
            order = np.argsort(ix, kind="stable")
            ixs = ix[order]
            rank = np.arange(len(ixs)) - np.searchsorted(ixs, ixs)
            root[off[ixs] + rank] = r[order]
            val[off[ixs] + rank] = v[order]
        self._extend(off[1:], root, val, src, np.fromiter((p[2] for p in pend), _I64, n),
                     np.fromiter((p[3] for p in pend), _I64, n))

    def _extend(self, ends: np.ndarray, root: np.ndarray, val: np.ndarray, src: np.ndarray, seq: np.ndarray,
                ts: np.ndarray) -> None:
        """Append rows as columns: `ends` are their anchor offsets' ends (from 0), root/val their
        anchors; out value, state and flags start at zero."""
        n = len(ends)
        self.off = np.concatenate([self.off, ends + self.off[-1]])
        self.root = np.concatenate([self.root, root])
        self.val = np.concatenate([self.val, val])
        self.src = np.concatenate([self.src, src])
        self.out = np.concatenate([self.out, np.zeros(n, _U64)])
        self.seq = np.concatenate([self.seq, seq])
        self.ts = np.concatenate([self.ts, ts])
        self.done = np.concatenate([self.done, np.zeros(n, np.uint8)])
        self.flag = np.concatenate([self.flag, np.zeros(n, np.uint8)])
        self.gone = np.concatenate([self.gone, np.zeros(n, bool)])

    def _source(self, b: Any) -> int:
        key = (b.component, b.stream, b.fields, b.source_task)
        i = self._source_ix.get(key)
        if i is None:
            i = self._source_ix[key] = len(self.sources)
            self.sources.append(key)
        return i

    # -- reliability ----------------------------------------------------------------------

    def sub_anchors(self, rows: np.ndarray) -> Anchors:
        """The anchors of the given rows, as rows 0..len(rows)-1."""
        run = as_run(rows)
        if run is not None:
            return self._run_anchors(*run)
        counts = self.off[rows + 1] - self.off[rows]
        off = np.zeros(len(rows) + 1, _I64)
        np.cumsum(counts, out=off[1:])
        _, pos = expand(self.off[rows], counts)
        return Anchors(off, self.root[pos], self.val[pos])

    def keys(self, rows: np.ndarray) -> np.ndarray:
        """The identity of each of `rows` (keys_of: what its edges are mixed from). A row is in
        many windows, so each row's key is computed once and kept until the next release (not
        held: it is dropped then, and not pickled)."""
        n = len(self.values)
        have = 0 if self._keys is None else len(self._keys)
        if have < n:
            self.consolidate()
            tail = keys_of(self._run_anchors(have, n), have)
            self._keys = tail if self._keys is None else np.concatenate([self._keys, tail])
        return self._keys[rows]

    def _run_anchors(self, a: int, b: int) -> Anchors:
        lo, hi = int(self.off[a]), int(self.off[b])
        return Anchors(self.off[a:b + 1] - lo, self.root[lo:hi], self.val[lo:hi])

    def ack(self, rows: np.ndarray) -> int:
        """Ack the pending ones of `rows` (the messages are computed at the task's flush)."""
        rows = rows[self.done[rows] == PENDING]
        self.done[rows] = ACKED
        if len(rows):
            self._acks.append(rows)
        return len(rows)

    def fail(self, rows: np.ndarray, reason: Any) -> int:
        """Fail the pending ones of `rows`, and drop them at the next release."""
        rows = rows[self.done[rows] == PENDING]
        self.done[rows] = FAILED
        self.gone[rows] = True
        if len(rows):
            self._fails.append((rows, reason))
        return len(rows)

    def take_messages(self) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, Any]], int, int]:
        """(ack roots, ack values, [(failed roots, reason)], rows acked, rows failed) since the
        last call; the out values are final here, since the batch's edges were computed first."""
        roots, vals = np.zeros(0, _U64), np.zeros(0, _U64)
        acked = failed = 0
        if self._acks:
            rows = np.concatenate(self._acks)
            acked = len(rows)
            roots, vals = ack_messages(self.anchors, rows, self.out)
        fails = []
        for rows, reason in self._fails:
            failed += len(rows)
            _, r = roots_of_rows(self.anchors, rows)
            if len(r):
                fails.append((np.unique(r), reason))
        self._acks, self._fails = [], []
        return roots, vals, fails, acked, failed

    def release(self) -> None:
        """Drop the rows marked gone (positions change: only at the task's flush)."""
        self.consolidate()
        self._keys = None
        if not self.gone.any():
            return
        self._floor = 0
        keep = np.flatnonzero(~self.gone)
        run = as_run(keep)
        if run is not None:  # one run (a window slid on): slices
            anc = self._run_anchors(*run)
            self.off, self.root, self.val = anc.off, anc.root, anc.val
            self.values = self.values[run[0]:run[1]]
            keep = slice(*run)
        else:
            anc = self.sub_anchors(keep)
            self.off, self.root, self.val = anc.off, anc.root, anc.val
            self.values = [self.values[i] for i in keep.tolist()]
        for name in ("src", "out", "seq", "ts", "done", "flag", "gone"):
            setattr(self, name, getattr(self, name)[keep])

    def nbytes(self) -> int:
        """Bytes held beyond the values themselves (the columns and the values list's slots)."""
        cols = (self.src, self.off, self.root, self.val, self.out, self.seq, self.ts, self.done, self.flag, self.gone)
        return sum(c.nbytes for c in cols) + 8 * len(self.values)

    def __getstate__(self) -> dict:
        self.consolidate()
        return {k: (None if k == "_keys" else v) for k, v in self.__dict__.items()}
