"""Storm's tree rules for whole batches of rows at once (columnar bolts and spouts).

A columnar emit anchors each output row to ONE input row (`anchors[i]`), and every child
(output row x target task) gets its edge: `edge = mix(anchor key, the input's key, the row's
ordinal among that input's outputs, target)`, XORed into the input row's out-ack value and into
the child's value for each root of the input row. All numpy, no Python step per row.
"""

from __future__ import annotations

import numpy as np

from squall.reliability.anchoring import Anchors, anchor_edges
from squall.reliability.ids import edge_ids
from squall.reliability.xor import xor_at

_U64 = np.uint64
_I64 = np.int64


def row_ordinals(anchor_row: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Each output row's ordinal among the outputs of its input row, counting from `base` (the
    input rows' outputs in earlier emits of the same batch); advances `base`."""
    m = len(anchor_row)
    if m and (anchor_row[1:] >= anchor_row[:-1]).all():  # rows in input order (the usual case): no sort
        order = np.arange(m)
        s = anchor_row
    else:
        order = np.argsort(anchor_row, kind="stable")
        s = anchor_row[order]
    new = np.ones(m, bool)
    np.not_equal(s[1:], s[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    rank = np.arange(m) - np.repeat(starts, np.diff(np.append(starts, m)))
    ords = np.empty(m, _I64)
    ords[order] = rank + base[s]
    base += np.bincount(anchor_row, minlength=len(base))
    return ords


def anchor_rows(anchors: Anchors, keys: np.ndarray, anchor_row: np.ndarray, ordinal: np.ndarray,
                child_row: np.ndarray, child_target: np.ndarray, out_ack: np.ndarray) -> Anchors:
    """The children's anchors_to_ids: child c is output row child_row[c] sent to child_target[c],
    anchored to input row anchor_row[child_row[c]]. XORs every edge into `out_ack` (per input row)."""
    nc = len(child_row)
    pair_row = anchor_row[child_row]
    contrib = anchor_edges(anchors, keys, pair_row, np.arange(nc), keys[pair_row], ordinal[child_row],
                           child_target, out_ack)
    off = np.zeros(nc + 1, _I64)
    np.cumsum(np.bincount(contrib.child, minlength=nc), out=off[1:])
    return Anchors(off, contrib.root, contrib.val)


def slice_anchors(anchors: Anchors, start: int, end: int) -> Anchors:
    """Rows start..end-1 of `anchors` as rows 0..end-start-1."""
    a, b = int(anchors.off[start]), int(anchors.off[end])
    return Anchors(anchors.off[start:end + 1] - a, anchors.root[a:b], anchors.val[a:b])


def spout_row_trees(row_root: np.ndarray, row_pos: np.ndarray, child_row: np.ndarray, child_target: np.ndarray,
                    root_slot: np.ndarray, n_roots: int) -> tuple[Anchors, np.ndarray]:
    """A spout batch: row i belongs to tree row_root[i] (slot root_slot[i] among the batch's
    roots) and is told apart from the tree's other rows by row_pos[i]. One edge per child;
    returns the children's anchors and each root's init value (the XOR of its edges)."""
    nc = len(child_row)
    roots = row_root[child_row]
    edges = edge_ids(roots, row_pos[child_row].astype(_U64), np.zeros(nc, _I64), child_target)
    init = np.zeros(n_roots, _U64)
    xor_at(init, root_slot[child_row], edges)
    return Anchors(np.arange(nc + 1, dtype=_I64), roots, edges), init
