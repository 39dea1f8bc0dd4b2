"""A task's children, split into one TupleBatch per (stream, target task): what travels on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from squall.api.collectors import LeanEmits
from squall.api.streams import StreamOut
from squall.reliability.anchoring import Anchors, expand
from squall.reliability.batch import TupleBatch, is_one_each, one_each
from squall.reliability.emits import EmitIndex

_I64 = np.int64


def group_children(component: str, task_id: int, n_streams: int, ix: EmitIndex,
                   anchors: Anchors | None) -> list[tuple[int, TupleBatch]]:
    """(target task, batch) for every (stream, target) the children go to, children in emit order."""
    ce, ct = ix.child_emit, ix.child_target
    nc = len(ce)
    if not nc:
        return []
    if n_streams > 1:
        sidx = np.fromiter((so.index for so in ix.streams), _I64, len(ix.streams))[ce]
        key = ct * n_streams + sidx
    else:
        key = ct
    if nc > 1 and (key[1:] != key[:-1]).any():
        order = np.argsort(key, kind="stable")
        skey = key[order]
        groups = np.split(order, np.flatnonzero(skey[1:] != skey[:-1]) + 1)
    else:
        groups = [np.arange(nc)]
    one_each = nc == len(ix.values) and bool((ce == np.arange(nc)).all())  # a child per emit, in order
    if len(groups) == 1 and one_each:  # every child to one place (global grouping, one task): the list as is
        values = None
    else:
        values = np.fromiter(ix.values, dtype=object, count=len(ix.values))
        if not one_each:
            values = values[ce]
    tracked = anchors is not None and len(anchors.root) > 0
    out: list[tuple[int, TupleBatch]] = []
    for idx in groups:
        first = int(idx[0])
        so: StreamOut = ix.streams[int(ce[first])]
        rows = list(ix.values) if values is None else values[idx].tolist()
        batch = TupleBatch(component, so.stream, so.fields, task_id, rows)
        if tracked:
            _give_anchors(batch, anchors, idx)
        out.append((int(ct[first]), batch))
    return out


def _give_anchors(batch: TupleBatch, anchors: Anchors, idx: np.ndarray | None) -> None:
    """`batch` (children `idx` of `anchors`; None: all of them, in order) gets their anchors_to_ids."""
    if len(anchors.root) == len(anchors.off) - 1 and is_one_each(anchors.off):  # one root a child: no counts
        if idx is None:
            batch.anc_off, batch.anc_root, batch.anc_val = one_each(len(batch)), anchors.root, anchors.val
        else:
            batch.anc_off, batch.anc_root, batch.anc_val = one_each(len(idx)), anchors.root[idx], anchors.val[idx]
        return
    if idx is None:
        idx = np.arange(len(batch))
    counts = anchors.counts[idx]
    if counts.any():
        _, pos = expand(anchors.off[idx], counts)
        batch.anc_off = np.zeros(len(idx) + 1, _I64)
        np.cumsum(counts, out=batch.anc_off[1:])
        batch.anc_root, batch.anc_val = anchors.root[pos], anchors.val[pos]


def bucket_children(component: str, task_id: int, lean: LeanEmits, bucket: np.ndarray | None,
                    anchors: Anchors | None) -> list[tuple[int, TupleBatch]]:
    """(target task, batch) for every bucket of lean emits (squall.api.collectors.LeanEmits:
    the children already split by destination, in emit order); `bucket[j]` is emit j's bucket,
    `anchors` the children's anchors_to_ids in emit order (None: none tracked, and `bucket` may
    be None)."""
    # in group_children's order (by target task, then stream), so both paths number them alike
    present = sorted((b for b, v in enumerate(lean.values) if v),
                     key=lambda b: (lean.buckets[b][1], lean.buckets[b][0].index))
    tracked = anchors is not None and len(anchors.root) > 0
    order = starts = None
    if tracked and len(present) > 1:
        # each bucket's emits, in emit order: a pass per bucket where they are few (a target
        # task or two), one stable sort where they are many
        order = np.concatenate([np.flatnonzero(bucket == b) for b in range(len(lean.values))]) \
            if len(lean.values) <= 4 else np.argsort(bucket, kind="stable")
        counts = np.bincount(bucket, minlength=len(lean.values))
        starts = np.cumsum(counts) - counts
    out: list[tuple[int, TupleBatch]] = []
    for b in present:
        so, target = lean.buckets[b]
        values = lean.values[b]
        batch = TupleBatch(component, so.stream, so.fields, task_id, None if so.nfields == 1 else values)
        if so.nfields == 1:  # kept flat (LeanEmits): it travels so, and its receiver reads it so
            batch.flat = values
        if tracked:
            _give_anchors(batch, anchors, None if order is None else order[starts[b]:starts[b] + len(values)])
        out.append((target, batch))
    return out


class EmitValues(Sequence):
    """The values of emits `rows` (emit indices, ascending) of a lean record, in that order, as
    lists: each looked up in its bucket only when read (a lost wave's dead letters), not copied
    per emit every wave."""

    def __init__(self, lean: LeanEmits, bucket: np.ndarray, rows: np.ndarray):
        self._lean, self._bucket, self._rows = lean, bucket, rows
        self._pos: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: int) -> list:  # type: ignore[override]
        if self._pos is None:  # each emit's place in its bucket
            order = np.argsort(self._bucket, kind="stable")
            counts = np.bincount(self._bucket, minlength=len(self._lean.values))
            self._pos = np.empty(len(self._bucket), _I64)
            self._pos[order] = np.arange(len(order)) - np.repeat(np.cumsum(counts) - counts, counts)
        j = int(self._rows[i])
        b = int(self._bucket[j])
        v = self._lean.values[b][int(self._pos[j])]
        return [v] if self._lean.buckets[b][0].nfields == 1 else v
