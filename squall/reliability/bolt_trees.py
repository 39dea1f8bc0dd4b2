"""The bolt side of Storm's tuple-tree rules, for one batch of inputs at a time.

After a bolt task has executed a batch, what its collector recorded is turned into:
- the children's `anchors_to_ids` (anchored emit: a fresh edge per anchor and target task,
  XORed into the anchor's out-ack value and into the child's value for each of its roots);
- ack messages `(root, anchors_to_ids[root] ^ out_ack_val)` for acked inputs, zero-valued
  messages for `reset_timeout` (progress without a change), failed roots with their reason;
- held tuples: inputs still pending after the batch keep their own anchors and the out-ack
  value gathered so far, so they can be acked or anchored to in a later batch or wave.
The Tuple slots `_b`, `_i`, `_done` and `_out` are written here (and `_done` by the collector).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import attrgetter
from typing import Any, Protocol

import numpy as np

from squall.reliability.anchoring import (
    Anchors,
    Contributions,
    ack_messages,
    anchor_edges,
    expand,
    keys_of,
    roots_of_rows,
)
from squall.reliability.batch import is_one_each, one_each
from squall.reliability.emits import EmitIndex
from squall.reliability.held import HeldRows, HeldStore
from squall.reliability.ids import edge_ids, edge_ids_for_child, mix64_int, row_keys
from squall.reliability.pending import FailReason
from squall.reliability.tuple import Tuple
from squall.reliability.xor import xor_at

_U64 = np.uint64
_I64 = np.int64
_EMPTY_I = np.zeros(0, _I64)
_get_i = attrgetter("_i")
_GOLD_INT = 0x9E3779B97F4A7C15


class MessageSink(Protocol):
    """Where a batch's ack and fail messages go (a task's result for the wave)."""

    ack_roots: list[np.ndarray]
    ack_vals: list[np.ndarray]
    fail_roots: list[int]
    fail_reasons: list[FailReason]


def batch_anchors(batch: Any) -> Anchors | None:
    """The inputs' anchors_to_ids (None: no input of the batch is tracked)."""
    return Anchors(batch.anc_off, batch.anc_root, batch.anc_val) if batch.anc_off is not None else None


def execute_salt(task_id: int, wave: int) -> int:
    """Identifies untracked executing inputs (and emits outside execute) of a task in a wave."""
    return mix64_int((task_id << 32) ^ wave)


def anchor_children(anchors: Anchors | None, n: int, ix: EmitIndex, salt: int,
                    out_ack: np.ndarray, settling: np.ndarray | None = None,
                    row_ids: np.ndarray | None = None) -> Anchors | None:
    """Edges for every anchored child of a batch; returns the children's anchors_to_ids and
    XORs each edge into `out_ack` (per input row) or into a held anchor's own out value. A
    child anchored to this batch's rows and sent to a task in `settling` (sorted ids) gets no
    edge: that task settles its batch whole (reliability/settled.py). `row_ids`: the batch's,
    if it settles whole (settled.settled_row_ids).
    When a child is anchored to a held tuple (its edge is real), every child gets its edge: a
    batch of children with some values 0 and some not would not be marked to settle, and the
    rows without an edge would be checked by nothing."""
    tracked = anchors is not None and len(anchors.root) > 0
    if not ((tracked and len(ix.pair_emit)) or ix.foreign or ix.held):
        return None
    if ix.foreign or ix.held:
        settling = None
    keys = keys_of(anchors if anchors is not None else Anchors.empty(n), salt, row_ids)
    ne = len(ix.values)
    nc = len(ix.child_emit)
    ccount = np.bincount(ix.child_emit, minlength=ne)
    cstart = np.cumsum(ccount) - ccount
    exec_key_of_emit = np.full(ne, _U64(salt))
    inside = ix.rows >= 0  # emitted inside an execute: that input's key
    exec_key_of_emit[inside] = keys[ix.rows[inside]]
    parts: list[Contributions] = []
    if tracked and len(ix.pair_emit):
        pe = ix.pair_emit
        grp, child_idx = expand(cstart[pe], ccount[pe])
        pj = pe[grp]
        parts.append(anchor_edges(anchors, keys, ix.pair_row[grp], child_idx, exec_key_of_emit[pj],
                                  ix.ords[pj], ix.child_target[child_idx], out_ack, settling))
    if ix.foreign:
        parts.append(_held_anchor_edges(ix.foreign, ccount, cstart, ix.child_target, exec_key_of_emit, ix.ords))
    for j, h in ix.held:  # each folded on its own: a window's part is large, its roots few
        parts.append(store_anchor_edges(h, np.arange(cstart[j], cstart[j] + ccount[j]), ix.child_target,
                                        int(exec_key_of_emit[j]), int(ix.ords[j])).folded())
    if len(parts) == 1 and not ix.multi and not ix.foreign and not ix.held:
        # one anchor per emit: contributions are already in child order, roots unique
        return parts[0].as_anchors(nc)
    contrib = parts[0] if len(parts) == 1 else Contributions(
        np.concatenate([p.child for p in parts]), np.concatenate([p.root for p in parts]),
        np.concatenate([p.val for p in parts]))
    if len(parts) == len(ix.held):
        # held parts only, each folded, and an emit's children are its own: just order by child
        if len(contrib.child) > 1 and (np.diff(contrib.child) < 0).any():
            order = np.argsort(contrib.child, kind="stable")
            contrib = Contributions(contrib.child[order], contrib.root[order], contrib.val[order])
        return contrib.as_anchors(nc)
    return contrib.merged(nc)


def anchor_own_rows(anchors: Anchors | None, rows: np.ndarray, ords: np.ndarray, targets: np.ndarray, salt: int,
                    out_ack: np.ndarray, settling: np.ndarray | None = None, row_ids: np.ndarray | None = None,
                    others: Sequence[int] = ()) -> Anchors | None:
    """`anchor_children` for children each anchored to the input that emitted it (the lean
    path's emits: squall.api.collectors.LeanEmits), one child per emit, in emit order: `rows`,
    `ords` and `targets` are per child its input row, its ordinal within that input's execute
    and its task; `others`: child, row, child, row, ... (flat) for children anchored to one more
    input of the batch.
    The same edges as `anchor_children` makes for the same emits."""
    if anchors is None or not len(anchors.root):
        return None
    keys = keys_of(anchors, salt, row_ids)
    if not len(others):  # the common case: one anchor a child, no per-pair copy of the arrays
        contrib = anchor_edges(anchors, keys, rows, np.arange(len(rows)), keys[rows], ords, targets, out_ack,
                               settling)
        return contrib.as_anchors(len(rows))  # in child order, one entry per (child, root) already
    more = np.array(others, _I64).reshape(-1, 2)
    child = np.concatenate([np.arange(len(rows)), more[:, 0]])
    pair_row = np.concatenate([rows, more[:, 1]])
    contrib = anchor_edges(anchors, keys, pair_row, child, keys[rows[child]], ords[child], targets[child], out_ack,
                           settling)
    return contrib.merged(len(rows))


def settled_own_rows(anchors: Anchors, rows: np.ndarray, others: Sequence[int] = ()) -> Anchors | None:
    """`anchor_own_rows` for children that all go to tasks that settle whole, when each input
    row has one root (a word's sentence): each child takes its input's root (and, anchored to a
    second input as well, `others`, that one's too: once if it is the same, else in root order),
    with no edge (0), and nothing goes into the inputs' out values, so no edge id or key is made.
    None when an input row has another number of roots (anchor_own_rows then)."""
    if not is_one_each(anchors.off):
        return None
    n = len(rows)
    first = anchors.root[rows]
    if not len(others):
        return Anchors(one_each(n), first, np.zeros(n, _U64))
    more = np.array(others, _I64).reshape(-1, 2)
    child, second = more[:, 0], anchors.root[more[:, 1]]
    a, b = first[child], second
    two = a != b
    child, a, b = child[two], a[two], b[two]
    counts = np.ones(n, _I64)
    counts[child] = 2
    off = np.zeros(n + 1, _I64)
    np.cumsum(counts, out=off[1:])
    root = np.empty(int(off[-1]), _U64)
    root[off[:-1]] = first
    root[off[child]] = np.minimum(a, b)
    root[off[child] + 1] = np.maximum(a, b)
    return Anchors(off, root, np.zeros(len(root), _U64))


def _held_anchor_edges(foreign: list[tuple[int, Tuple]], ccount: np.ndarray, cstart: np.ndarray,
                       ct: np.ndarray, exec_key: np.ndarray, ords: np.ndarray) -> Contributions:
    """Edges for anchors received in an earlier batch or wave (held tuples): one Python step per
    anchor to read its roots, then numpy for every (anchor, child) edge; the XOR of each anchor's
    edges goes into its out value, which lives on the Tuple itself."""
    held = [(j, a, *a._b.anchors_of(a._i)) for j, a in foreign]
    held = [h for h in held if len(h[2])]
    if not held:
        return Contributions(np.zeros(0, _I64), np.zeros(0, _U64), np.zeros(0, _U64))
    js = np.fromiter((h[0] for h in held), _I64, len(held))
    rcount = np.fromiter((len(h[2]) for h in held), _I64, len(held))
    roots = np.concatenate([h[2] for h in held]).astype(_U64)
    vals = np.concatenate([h[3] for h in held]).astype(_U64)
    roff = np.cumsum(rcount) - rcount
    ka = row_keys(roots[roff], vals[roff])
    grp, child = expand(cstart[js], ccount[js])  # one edge per (anchor, child of its emit)
    e = edge_ids(ka[grp], exec_key[js][grp], ords[js][grp], ct[child])
    out = np.zeros(len(held), _U64)
    xor_at(out, grp, e)
    for h, o in zip(held, out.tolist()):
        h[1]._out ^= o
    g2, pos = expand(roff[grp], rcount[grp])  # and every root of the anchor gets it
    return Contributions(child[g2], roots[pos], e[g2])


def store_anchor_edges(h: HeldRows, children: np.ndarray, ct: np.ndarray, exec_key: int,
                       ordinal: int) -> Contributions:
    """Edges for one emit anchored to many rows of a HeldStore (a window), vectorized: one edge
    per (row, child), XORed into the row's out value and into the child for each root of the row.
    The emit is one (executing key, ordinal), so each child's part of the edge id is mixed once."""
    store = h.store
    tracked = store.off[h.rows + 1] > store.off[h.rows]  # anchoring to an untracked tuple tracks nothing
    rows = h.rows if tracked.all() else h.rows[tracked]
    if not len(rows) or not len(children):
        return Contributions(np.zeros(0, _I64), np.zeros(0, _U64), np.zeros(0, _U64))
    sub = store.sub_anchors(rows)
    counts = sub.counts
    keys = store.keys(rows)
    n = len(rows)
    edges = [edge_ids_for_child(keys, exec_key, ordinal, int(t)) for t in ct[children].tolist()]
    out = edges[0].copy()
    for e in edges[1:]:
        out ^= e
    store.out[rows] ^= out  # rows are distinct
    e_all = np.concatenate(edges) if len(edges) > 1 else edges[0]
    child = np.repeat(children, n)
    if (counts == 1).all():
        return Contributions(child, np.tile(sub.root, len(children)), e_all)
    grp, pos = expand(np.tile(sub.off[:-1], len(children)), np.tile(counts, len(children)))
    return Contributions(child[grp], sub.root[pos], e_all[grp])


def settle_held(stores: list[HeldStore], sink: MessageSink, counts: Any) -> None:
    """Ack and fail messages for the rows a bolt acked or failed in its stores since the last
    flush (after the flush's edges, so out values are final); then the stores drop gone rows."""
    for store in stores:
        roots, vals, fails, acked, failed = store.take_messages()
        if len(roots):
            sink.ack_roots.append(roots)
            sink.ack_vals.append(vals)
        for r, reason in fails:
            for x in r.tolist():
                sink.fail_roots.append(x)
                sink.fail_reasons.append(reason)
        counts.acked += acked
        counts.failed += failed
        store.release()


class InputVerdicts(Protocol):
    """What a bolt decided about its inputs since the last flush (its collector's record)."""

    acks: list[Tuple]
    fails: list[tuple[Tuple, Any]]  # (tuple, FailReason or None)
    resets: list[Tuple]  # reset_timeout
    ack_rows: list[int]  # more acked rows of the batch, with no Tuple (a BasicBolt's)


def settle_inputs(batch: Any, anchors: Anchors | None, verdicts: InputVerdicts, out_ack: np.ndarray,
                  sink: MessageSink, failed: FailReason, own_acks: bool = False) -> None:
    """Ack messages for acked inputs, zero messages for resets, failed roots with reasons (`failed`
    where the bolt gave none). `own_acks`: every acked tuple is a row of `batch` (a BasicBolt's),
    so none is looked at alone."""
    acks, fails, resets, acked_rows = verdicts.acks, verdicts.fails, verdicts.resets, verdicts.ack_rows
    if anchors is None and (own_acks or all(t._b is batch for t in acks)) \
            and all(f[0]._b is batch for f in fails) and all(t._b is batch for t in resets):
        return  # nothing here is tracked
    here = Anchors.empty(len(batch)) if anchors is None else anchors
    settled = getattr(batch, "anc_settle", None) is not None  # no edges: a message only where children were anchored
    if settled and not out_ack.any():  # no row's ack says more than the settling does
        ack_rows = _EMPTY_I
    elif own_acks:
        ack_rows = np.fromiter(chain(map(_get_i, acks), acked_rows), _I64, len(acks) + len(acked_rows))
    else:
        ack_rows = np.array([t._i for t in acks if t._b is batch] + list(acked_rows), _I64)
    if settled and len(ack_rows):
        ack_rows = ack_rows[out_ack[ack_rows] != 0]
    if len(ack_rows) and len(here.root):
        r, v = ack_messages(here, ack_rows, out_ack)
        sink.ack_roots.append(r)
        sink.ack_vals.append(v)
    for t in () if own_acks else acks:
        if t._b is not batch:  # held from an earlier batch
            roots, vals = t._b.anchors_of(t._i)
            if len(roots):
                sink.ack_roots.append(roots)
                sink.ack_vals.append(vals ^ _U64(t._out))
    reset_rows = [t._i for t in resets if t._b is batch]
    if reset_rows and len(here.root):
        _, roots = roots_of_rows(here, np.array(reset_rows, _I64))
        sink.ack_roots.append(roots)
        sink.ack_vals.append(np.zeros(len(roots), _U64))
    for t in resets:
        if t._b is not batch:
            roots, _ = t._b.anchors_of(t._i)
            sink.ack_roots.append(roots)
            sink.ack_vals.append(np.zeros(len(roots), _U64))
    for t, reason in fails:
        roots, _ = t._b.anchors_of(t._i)
        if len(roots):
            why = reason or failed
            for r in roots.tolist():
                sink.fail_roots.append(r)
                sink.fail_reasons.append(why)


def hold_pending(tuples: list[Tuple], batch: Any, out_ack: np.ndarray, sink: MessageSink | None = None,
                 salt: int = 0) -> None:
    """Inputs still pending after their batch may be held for later waves: each keeps its own
    anchors and out-ack value, and lets the batch go.
    A row held with no edge for one of its roots (value 0: it came in a batch that settles whole,
    reliability/settled.py, or was sent to a task that settles with no edge from an anchor of
    this batch) gets a fresh edge, XORed into its roots now (a message to `sink`) and into its
    own value, which its later ack or anchoring reads, as Storm does for a child: its tree waits
    for it. The edge is the row's position mixed with `salt` (the task, wave and batch), so a
    rerun makes the same one."""
    for t in tuples:
        if t._done == 0:
            i = t._i
            t._out ^= int(out_ack[i])
            t._b = b = batch.row_batch(i)  # its own copy of the row's anchors
            t._i = 0
            if sink is not None and len(b.anc_root) and not b.anc_val.all():
                e = mix64_int(salt + i * _GOLD_INT) or 1
                b.anc_val ^= _U64(e)
                sink.ack_roots.append(b.anc_root.copy())
                sink.ack_vals.append(np.full(len(b.anc_root), e, _U64))


class BatchTrees:
    """The entry point of these rules for a bolt task: one input batch after its executes ran.
    `out_ack` holds, per input row, the XOR of the edges of the children anchored to it: the
    children's anchoring builds it up, and the acks of the inputs and the tuples still held read
    it, so the steps go in this order: children, settle, hold."""

    __slots__ = ("batch", "anchors", "out_ack")

    def __init__(self, batch: Any) -> None:
        self.batch = batch
        self.anchors = batch_anchors(batch)
        self.out_ack = np.zeros(len(batch), _U64)

    @property
    def tracked(self) -> bool:
        """Whether any input of the batch is in a tree."""
        return self.anchors is not None and len(self.anchors.root) > 0

    def children(self, ix: EmitIndex, salt: int, settling: np.ndarray | None,
                 row_ids: np.ndarray | None) -> Anchors | None:
        """The anchors_to_ids of the recorded emits' children (anchor_children)."""
        return anchor_children(self.anchors, len(self.batch), ix, salt, self.out_ack, settling, row_ids)

    def own_row_children(self, rows: np.ndarray, ords: np.ndarray, targets: np.ndarray, salt: int,
                         settling: np.ndarray | None, row_ids: np.ndarray | None,
                         all_settle: bool, others: Sequence[int] = ()) -> Anchors | None:
        """The same for the lean path's children, each anchored to the input that emitted it
        (and those in `others`, flat child-row pairs, to one more input); with no edge at all when
        every child goes to a task that settles whole (`all_settle`) and every input has one root."""
        got = settled_own_rows(self.anchors, rows, others) if all_settle else None
        if got is None:
            got = anchor_own_rows(self.anchors, rows, ords, targets, salt, self.out_ack, settling, row_ids, others)
        return got

    def settle(self, verdicts: InputVerdicts, sink: MessageSink, failed: FailReason, own_acks: bool = False) -> None:
        """The inputs' acks, resets and fails as messages (settle_inputs)."""
        settle_inputs(self.batch, self.anchors, verdicts, self.out_ack, sink, failed, own_acks)

    def hold(self, tuples: list[Tuple], sink: MessageSink, salt: int) -> None:
        """The inputs still pending kept for later waves (hold_pending)."""
        hold_pending(tuples, self.batch, self.out_ack, sink, salt)

