"""Storm's tree rules for whole batches of rows at once (columnar bolts and spouts).

A columnar emit anchors each output row to ONE input row (`anchors[i]`), and every child
(output row x target task) gets its edge: `edge = mix(anchor key, the input's key, the row's
ordinal among that input's outputs, target)`, XORed into the input row's out-ack value and into
the child's value for each root of the input row. All numpy, no Python step per row.

Where every output row has one child and every input row one root (a split: the usual case),
the edges are derived instead: a splitmix64 stream per emit and target task, position by
position, mixed with the child's root. The receiver makes them again from the roots it gets
anyway, so the 8 bytes a row of edge values do not travel (ColumnBatch pickles without them).
"""

from __future__ import annotations

from collections.abc import Container

import numpy as np

from squall.reliability.anchoring import Anchors, anchor_edges
from squall.reliability.batch import is_one_each, one_each, run_starts
from squall.reliability.ids import derived_edge_ids, derived_salt, edge_ids
from squall.reliability.xor import xor_at

_U64 = np.uint64
_I64 = np.int64


def row_ordinals(anchor_row: np.ndarray, base: np.ndarray | None = None) -> np.ndarray:
    """Each output row's ordinal among the outputs of its input row, counting from `base[row]`
    (the input row's outputs in earlier emits of the same batch; None: there were none)."""
    m = len(anchor_row)
    if not m:
        return np.zeros(0, _I64)
    if (anchor_row[1:] >= anchor_row[:-1]).all():  # rows in input order (the usual case): no sort
        order = None
        s = anchor_row
    else:
        order = np.argsort(anchor_row, kind="stable")
        s = anchor_row[order]
    new = np.empty(m, bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    rank = _run_ranks(new)
    if base is not None:
        rank += base[s]
    if order is None:
        return rank
    ords = np.empty(m, _I64)
    ords[order] = rank
    return ords


def _run_ranks(new: np.ndarray) -> np.ndarray:
    """Each element's position within its run, runs starting where `new` is True (new[0] is),
    without repeating the run starts."""
    m = len(new)
    pos = np.arange(m)
    start = np.where(new, pos, 0)
    np.maximum.accumulate(start, out=start)
    pos -= start
    return pos


def outputs_per_row(anchor_row: np.ndarray, base: np.ndarray | None, n_rows: int) -> np.ndarray:
    """`base` advanced past an emit: how many outputs each input row has had so far."""
    counts = np.bincount(anchor_row, minlength=n_rows)
    return counts if base is None else base + counts


def anchor_rows(anchors: Anchors, keys: np.ndarray, anchor_row: np.ndarray, ordinal: np.ndarray,
                child_row: np.ndarray, child_target: np.ndarray, out_ack: np.ndarray) -> Anchors:
    """The children's anchors_to_ids: child c is output row child_row[c] sent to child_target[c],
    anchored to input row anchor_row[child_row[c]]. XORs every edge into `out_ack` (per input row).
    (Where `derivable`, `derived_rows` does the same for less.)"""
    nc = len(child_row)
    pair_row = anchor_row[child_row]
    contrib = anchor_edges(anchors, keys, pair_row, np.arange(nc), keys[pair_row], ordinal[child_row],
                           child_target, out_ack)
    off = np.zeros(nc + 1, _I64)
    np.cumsum(np.bincount(contrib.child, minlength=nc), out=off[1:])
    return Anchors(off, contrib.root, contrib.val)


def derivable(anchors: Anchors, anchor_row: np.ndarray, child_row: np.ndarray) -> bool:
    """Every output row has one child and every input row one root (a split): its children's
    edges can be derived (`derived_rows`)."""
    n = len(anchors.off) - 1
    return len(child_row) == len(anchor_row) and len(anchors.root) == n and is_one_each(anchors.off)


def derived_rows(anchors: Anchors, anchor_row: np.ndarray, child_row: np.ndarray, child_target: np.ndarray,
                 out_ack: np.ndarray, execute_salt: int, emit_seq: int,
                 settling: Container[int] = ()) -> tuple[Anchors, dict[int, int], set[int]]:
    """anchor_rows for a `derivable` emit, whose edges are derived (ids.derived_edge_ids): the
    children come grouped by target, one batch per target (child_row is a permutation of the
    rows, as every route gives each row at least once), and each target's get their edges by
    position in its batch from its salt (`execute_salt` names the task and wave, `emit_seq` the
    emit within them). Returned with the children: each target's salt (the receiver makes the
    edge values again from the roots, so they need not travel) and the targets that settle
    whole (in `settling`: columnar and BasicBolt tasks; their children get no edges,
    reliability/settled.py, and the salt is their batch's id). The edges are XORed into `out_ack` in row order, where
    the rows of one input sit together (a sentence's words) and fold as runs, not element by
    element (np.bitwise_xor.at)."""
    roots = anchors.root[anchor_row[child_row]]
    e, salts, settle = _edges_by_target(roots, child_target, execute_salt, emit_seq, settling)
    if len(settle) < len(salts):  # some children have edges
        _xor_in_row_order(out_ack, anchor_row, child_row, e)
    return Anchors(one_each(len(child_row)), roots, e), salts, settle


def _xor_in_row_order(target: np.ndarray, slot: np.ndarray, child_row: np.ndarray, edges: np.ndarray) -> None:
    """target[slot[r]] ^= the edge of row r's child, for children that are a permutation of the
    rows (in child order, grouped by target): put back in row order, where a slot's rows sit
    together and fold as runs (xor_at), not element by element."""
    e_row = np.empty(len(child_row), _U64)
    e_row[child_row] = edges
    xor_at(target, slot, e_row)


def _edges_by_target(roots: np.ndarray, child_target: np.ndarray, execute_salt: int, emit_seq: int,
                     settling: Container[int] = ()) -> tuple[np.ndarray, dict[int, int], set[int]]:
    """Derived edges of children grouped by target (one run per target), each target's salt,
    and the targets that settle whole (their children's edges are 0)."""
    nc = len(roots)
    starts = run_starts(child_target).tolist() + [nc]
    e = np.empty(nc, _U64)
    salts = {}
    settle = set()
    for s, end in zip(starts[:-1], starts[1:]):
        target = int(child_target[s])
        salts[target] = derived_salt(execute_salt, emit_seq, target)
        if target in settling:
            settle.add(target)
            e[s:end] = 0
        else:
            e[s:end] = derived_edge_ids(roots[s:end], salts[target])
    return e, salts, settle


def slice_anchors(anchors: Anchors, start: int, end: int) -> Anchors:
    """Rows start..end-1 of `anchors` as rows 0..end-start-1."""
    a, b = int(anchors.off[start]), int(anchors.off[end])
    if is_one_each(anchors.off):  # one entry a row: the slice's offsets are 0..n again (shared, no pass)
        return Anchors(one_each(end - start), anchors.root[a:b], anchors.val[a:b])
    return Anchors(anchors.off[start:end + 1] - a, anchors.root[a:b], anchors.val[a:b])


def spout_row_trees(row_root: np.ndarray, row_pos: np.ndarray, child_row: np.ndarray, child_target: np.ndarray,
                    root_slot: np.ndarray, n_roots: int, salt: tuple[int, int] | None = None,
                    settling: Container[int] = ()) -> tuple[Anchors, np.ndarray, dict[int, int] | None]:
    """A spout batch: row i belongs to tree row_root[i] (slot root_slot[i] among the batch's
    roots) and is told apart from the tree's other rows by row_pos[i]. One edge per child;
    returns the children's anchors, each root's init value (the XOR of its edges) and, where
    the edges are derived (one child per row, `salt` given: the spout task's salt and the
    emit's sequence), each target's salt, else None (see derived_rows). Derived, a child sent
    to a task in `settling` gets no edge (0: reliability/settled.py)."""
    nc = len(child_row)
    roots = row_root[child_row]
    salts = None
    settle: set[int] = set()
    if salt is not None and nc == len(row_root) and nc:
        edges, salts, settle = _edges_by_target(roots, child_target, salt[0], salt[1], settling)
    else:
        edges = edge_ids(roots, row_pos[child_row].astype(_U64), np.zeros(nc, _I64), child_target)
    init = np.zeros(n_roots, _U64)
    if salts is not None:  # one child per row: root slots in row order fold as runs
        if len(settle) < len(salts):  # some children have edges
            _xor_in_row_order(init, root_slot, child_row, edges)
    else:
        xor_at(init, root_slot[child_row], edges)
    return Anchors(one_each(nc), roots, edges), init, salts
