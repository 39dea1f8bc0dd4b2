"""A columnar emit's children, split into one ColumnBatch per target task: what travels on."""

from __future__ import annotations

from collections.abc import Container

import numpy as np

from squall.api.streams import StreamOut
from squall.columnar.arrow import take
from squall.columnar.batch import ColumnBatch
from squall.reliability.anchoring import Anchors
from squall.reliability.columns import slice_anchors


def column_children(component: str, task_id: int, so: StreamOut, data: object, child_row: np.ndarray,
                    child_target: np.ndarray, anchors: Anchors | None,
                    derive: dict[int, int] | None = None,
                    settle: Container[int] = ()) -> list[tuple[int, ColumnBatch]]:
    """(target task, batch) per run of equal targets in `child_target` (children grouped by target);
    `derive`: each target's salt when the edge values are derived (they need not travel), or,
    for a target in `settle`, its batch's id (its rows have no edge values: reliability/settled.py)."""
    nc = len(child_row)
    if not nc:
        return []
    new = np.ones(nc, bool)
    np.not_equal(child_target[1:], child_target[:-1], out=new[1:])
    starts = np.flatnonzero(new).tolist() + [nc]
    out = []
    for s, e in zip(starts[:-1], starts[1:]):
        b = ColumnBatch(component, so.stream, so.fields, task_id, take(data, child_row[s:e]))
        if anchors is not None and anchors.off[e] > anchors.off[s]:
            sub = slice_anchors(anchors, s, e)
            b.anc_off, b.anc_root, b.anc_val = sub.off, sub.root, sub.val
            if derive is not None:
                target = int(child_target[s])
                if target in settle:
                    b.anc_settle = derive[target]
                else:
                    b.anc_derive = derive[target]
        out.append((int(child_target[s]), b))
    return out
