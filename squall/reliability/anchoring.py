"""Bulk anchoring: a batch's recorded emits and acks become edge ids, children's
`anchors_to_ids` and ack messages, computed with numpy for the whole batch at once.

Storm's rules, vectorized:
- anchored emit: for each anchor `a` and each target task, a fresh edge id `e`;
  `a.out_ack_val ^= e`, and for each root `r` of `a`: `child.anchors_to_ids[r] ^= e`;
- `ack(t)`: for each root `r` of `t`: message `(r, t.anchors_to_ids[r] ^ t.out_ack_val)`.
Edge ids are deterministic (ids.edge_ids), so re-running a batch reproduces them exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from squall.reliability.batch import is_one_each, run_starts
from squall.reliability.ids import edge_ids, mix64, row_keys
from squall.reliability.xor import fold_runs, xor_at

_U64 = np.uint64
_I64 = np.int64
_EMPTY_U = np.zeros(0, _U64)
_EMPTY_I = np.zeros(0, _I64)


@dataclass
class Anchors:
    """`anchors_to_ids` of n rows as flat arrays: row i owns entries off[i]:off[i+1]."""

    off: np.ndarray
    root: np.ndarray
    val: np.ndarray

    @classmethod
    def empty(cls, n: int) -> Anchors:
        return cls(np.zeros(n + 1, _I64), _EMPTY_U, _EMPTY_U)

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.off)


def keys_of(anchors: Anchors, salt: int, row_ids: np.ndarray | None = None) -> np.ndarray:
    """Per row: its identity (from its first root and value) or, untracked, a salted position.

    A row of a batch that settles whole has no edge value (0: reliability/settled.py), so its
    rows of one root would share a key, and children they emit alike the same edge: two of them
    anchoring one tuple (a join) XORed it out of the tree, which then completed with that tuple
    still held. `row_ids` (settled.settled_row_ids, per row) stand in for a value of 0."""
    n = len(anchors.off) - 1
    counts = anchors.counts
    tracked = counts > 0
    if n and tracked.all():  # every row tracked: no salted positions needed
        first = anchors.off[:-1]
        return row_keys(anchors.root[first], _first_vals(anchors.val[first], row_ids))
    keys = mix64(np.arange(n, dtype=_U64) + _U64(salt & 0xFFFFFFFFFFFFFFFF))
    if tracked.any():
        first = anchors.off[:-1][tracked]
        keys[tracked] = row_keys(anchors.root[first], _first_vals(anchors.val[first],
                                                                  None if row_ids is None else row_ids[tracked]))
    return keys


def _first_vals(vals: np.ndarray, row_ids: np.ndarray | None) -> np.ndarray:
    """The rows' first values, a row id where it is 0 (no edge: a settled row)."""
    if row_ids is None:
        return vals
    zero = vals == 0
    return row_ids if zero.all() else np.where(zero, row_ids, vals)


def expand(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For groups (start, count): (group index, element index) of every element, in order."""
    if len(counts) and (counts == 1).all():  # one element per group (one root per row, the usual case)
        return np.arange(len(counts)), starts
    total = int(counts.sum())
    if total == 0:
        return _EMPTY_I, _EMPTY_I
    grp = np.repeat(np.arange(len(counts)), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    return grp, np.repeat(starts, counts) + (np.arange(total) - first)


@dataclass
class Contributions:
    """Anchor contributions to children: child index, root, XOR value (unsorted, may repeat)."""

    child: np.ndarray
    root: np.ndarray
    val: np.ndarray

    def folded(self) -> Contributions:
        """Sorted by (child, root), repeated roots of a child combined by XOR: one entry per
        (child, root). Folding a large part on its own (a window's 10,000 rows over ~1,000
        sentences) keeps the final merge small."""
        if not len(self.child):
            return self
        part = self._neighbours_folded(at_most=0.5)  # a sentence's words sit together: fewer to sort
        order = np.lexsort((part.root, part.child))
        return Contributions(part.child[order], part.root[order], part.val[order])._neighbours_folded(at_most=1.0)

    def _neighbours_folded(self, at_most: float) -> Contributions:
        """Runs of equal (child, root) neighbours combined by XOR, if that leaves at most this
        share of the entries (else as they are)."""
        child, root = self.child, self.root
        new = np.ones(len(child), bool)
        new[1:] = (child[1:] != child[:-1]) | (root[1:] != root[:-1])
        starts = np.flatnonzero(new)
        if len(starts) == len(child) or len(starts) > at_most * len(child):
            return self
        return Contributions(child[starts], root[starts], np.bitwise_xor.reduceat(self.val, starts))

    def merged(self, n_children: int) -> Anchors:
        """Group by child (and combine repeated roots of a child by XOR) into Anchors."""
        return self.folded().as_anchors(n_children)

    def as_anchors(self, n_children: int) -> Anchors:
        """Anchors of contributions already grouped by child, one entry per (child, root)."""
        if not len(self.child):
            return Anchors.empty(n_children)
        counts = np.bincount(self.child, minlength=n_children)
        off = np.zeros(n_children + 1, _I64)
        np.cumsum(counts, out=off[1:])
        return Anchors(off, self.root, self.val)


def anchor_edges(anchors: Anchors, keys: np.ndarray, pair_row: np.ndarray, pair_child: np.ndarray,
                 exec_key: np.ndarray, ordinal: np.ndarray, target: np.ndarray, out_ack: np.ndarray,
                 settling: np.ndarray | None = None) -> Contributions:
    """Edges for (anchor row, child) pairs of one batch.

    pair_row: the anchored input row; pair_child: the child (one per target task) it anchors;
    exec_key/ordinal/target: per pair, the executing input's key, the emit's ordinal within
    that execute, and the child's target task. XORs each edge into `out_ack[row]` and returns
    the children's contributions for every root of the anchor. A child whose target is in
    `settling` (sorted task ids: reliability/settled.py) gets no edge (0).
    """
    counts = anchors.counts[pair_row]
    keep = counts > 0  # anchoring to an untracked tuple tracks nothing
    if not keep.all():
        pair_row, pair_child, exec_key, ordinal, target, counts = (
            pair_row[keep], pair_child[keep], exec_key[keep], ordinal[keep], target[keep], counts[keep])
    if not len(pair_row):
        return Contributions(_EMPTY_I, _EMPTY_U, _EMPTY_U)
    e, live = edges_but_settling(keys, pair_row, exec_key, ordinal, target, settling)
    if live is None:
        xor_at(out_ack, pair_row, e)
    elif live.any():
        xor_at(out_ack, pair_row[live], e[live])
    if (counts == 1).all():
        pos = anchors.off[pair_row]
        return Contributions(pair_child, anchors.root[pos], e)
    grp, pos = expand(anchors.off[pair_row], counts)
    return Contributions(pair_child[grp], anchors.root[pos], e[grp])


def edges_but_settling(keys: np.ndarray, pair_row: np.ndarray, exec_key: np.ndarray, ordinal: np.ndarray,
                       target: np.ndarray, settling: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Each pair's edge id, 0 for a child to a task in `settling` (none is made for it), and
    which pairs have one (None: all)."""
    if settling is None or not len(settling):
        return edge_ids(keys[pair_row], exec_key, ordinal, target), None
    live = ~np.isin(target, settling)
    e = np.zeros(len(pair_row), _U64)
    if live.any():
        e[live] = edge_ids(keys[pair_row[live]], exec_key[live], ordinal[live], target[live])
    return e, live


def ack_messages(anchors: Anchors, rows: np.ndarray | None, out_ack: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ack messages (root, value ^ out_ack_val) for every root of the given rows (None: all)."""
    n = len(anchors.off) - 1
    if not n or not len(anchors.root) or (rows is not None and not len(rows)):
        return _EMPTY_U, _EMPTY_U
    if (rows is None or len(rows) == n) and n == len(anchors.root) and is_one_each(anchors.off):
        # every row, one root each (a columnar batch none of whose rows failed): no gathers
        return anchors.root.copy(), anchors.val ^ out_ack
    if rows is None:
        rows = np.arange(n)
    grp, pos = expand(anchors.off[rows], anchors.counts[rows])
    return anchors.root[pos], anchors.val[pos] ^ out_ack[rows[grp]]


def roots_of_rows(anchors: Anchors, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row position in `rows`, root) for every root of the given rows."""
    if not len(rows) or not len(anchors.root):
        return _EMPTY_I, _EMPTY_U
    grp, pos = expand(anchors.off[rows], anchors.counts[rows])
    return grp, anchors.root[pos]


def combine(roots: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fold ack messages per root (XOR): what crosses the network is one message per root."""
    if len(roots) < 2:
        return roots, vals
    if (roots[1:] > roots[:-1]).all():  # already one message per root, in order (roots are consecutive)
        return roots, vals
    # messages of a root sit together (a sentence's words): fold those runs first, in one pass,
    # and sort only what is left
    roots, vals = fold_runs(roots, vals)
    if len(roots) < 2 or (roots[1:] > roots[:-1]).all():
        return roots, vals
    order = np.argsort(roots, kind="stable")
    r, v = roots[order], vals[order]
    starts = run_starts(r)
    return r[starts], np.bitwise_xor.reduceat(v, starts)
