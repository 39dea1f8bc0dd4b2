"""Spout emits become tuple trees: a root id per tracked emit, one edge per target task, and
the root's init value (the XOR of its edges) for the acker.

Storm's rule: a spout emit with a msg id starts a tree; each child the emit creates (one per
target task) gets a fresh edge id, and the acker starts the root at the XOR of those edges, so
the tree completes when every child has been acked. `SharedRoot` is squall's addition: many
emits under one msg id form ONE tree (Trident emits each batch this way).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from squall.reliability.anchoring import Anchors, edges_but_settling
from squall.reliability.xor import xor_at

_U64 = np.uint64
_I64 = np.int64
_EMPTY_U = np.zeros(0, _U64)


class SharedRoot:
    """A msg id under which many spout emits form ONE tuple tree (acked when all of them are
    processed, failed if any fails)."""

    __slots__ = ("msg_id",)

    def __init__(self, msg_id: Any):
        self.msg_id = msg_id

    def __repr__(self) -> str:
        return f"SharedRoot({self.msg_id!r})"


class SpoutTrees(NamedTuple):
    """The trees one batch of spout emits starts."""

    tracked_emits: list[int]  # the emits that own a root (one per msg id; a SharedRoot's first emit)
    msg_ids: list[Any]  # their msg ids, in the same order
    roots: np.ndarray  # their root ids (empty without tracking)
    init_vals: np.ndarray  # the acker's start value per root: the XOR of its edges
    child_anchors: Anchors | None  # anchors_to_ids of every child (None: nothing tracked)


def _root_owner(root_of_emit: np.ndarray, child_emit: np.ndarray, tracked: list[int],
                shared: list[int]) -> np.ndarray:
    """For each tracked child: the index of the emit that owns its root (itself, or the first
    emit of its SharedRoot), so a shared root's init value is the XOR of all its edges."""
    if not shared:
        return child_emit
    owner = np.arange(len(root_of_emit))
    first = {}
    for j in tracked:
        first[int(root_of_emit[j])] = j
    rs = root_of_emit[np.array(shared, _I64)]
    owner[np.array(shared, _I64)] = [first[int(r)] for r in rs.tolist()]
    return owner[child_emit]


def spout_edges(roots: np.ndarray, pos: np.ndarray, target: np.ndarray, settling: np.ndarray | None) -> np.ndarray:
    """One edge per child (its root, its position among the root's emits, its target task); 0
    for a child sent to a task in `settling` (sorted ids), which settles its batch whole: as a
    bolt's children there, it needs no edge (reliability/settled.py) and none is made."""
    n = len(roots)
    return edges_but_settling(roots, np.arange(n), pos, np.zeros(n, _I64), target, settling)[0]


def spout_trees(mids: Sequence[Any], child_emit: np.ndarray, child_target: np.ndarray,
                roots_for: Callable[[int], np.ndarray], tracking: bool,
                settling: np.ndarray | None = None) -> SpoutTrees:
    """Roots, edges and init values for a batch of spout emits (msg id per emit, None untracked).

    child_emit/child_target: the emit and target task of every child (one per emit and target).
    roots_for(k) hands out k fresh root ids. A child sent to a task in `settling` gets no edge
    (`spout_edges`): a root whose children all went there starts at 0.
    """
    tracked = [j for j, m in enumerate(mids) if m is not None]
    shared = [j for j in tracked if type(mids[j]) is SharedRoot]
    owner: dict[int, int] = {}
    if shared:  # emits of one SharedRoot are one tree: its first emit stands for the root
        first: dict[int, int] = {}
        owner = {j: first.setdefault(id(mids[j]), j) for j in shared}
        tracked = [j for j in tracked if owner.get(j, j) == j]
    msg_ids = [mids[j].msg_id if type(mids[j]) is SharedRoot else mids[j] for j in tracked]
    if not (tracking and tracked):
        return SpoutTrees(tracked, msg_ids, _EMPTY_U, _EMPTY_U, None)
    roots = roots_for(len(tracked))
    root_of_emit = np.zeros(len(mids), _U64)
    te = np.array(tracked, _I64)
    root_of_emit[te] = roots
    if shared:
        root_of_emit[np.array(shared, _I64)] = root_of_emit[np.array([owner[j] for j in shared], _I64)]
    child_root = root_of_emit[child_emit]
    has = child_root != 0
    # one edge per (emit, target): emits sharing a root are told apart by their position
    edges = spout_edges(child_root[has], child_emit[has].astype(_U64), child_target[has], settling)
    off = np.zeros(len(child_emit) + 1, _I64)
    np.cumsum(has, out=off[1:])
    # init value per root = XOR of its edges (0 when nothing subscribes, or every child went
    # to a task that settles whole: the ledger completes it unless the wave's messages hold it)
    slot = np.zeros(len(mids), _U64)
    xor_at(slot, _root_owner(root_of_emit, child_emit[has], tracked, shared), edges)
    return SpoutTrees(tracked, msg_ids, roots, slot[te], Anchors(off, child_root[has], edges))
