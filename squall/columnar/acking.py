"""What a columnar task sends for the rows it acked: ack messages (root, value) only where a
value must travel.

- A row of a batch that settles whole (reliability/settled.py) has no edge: it needs a message
  only if the task anchored children to it (their edges are in its out-ack value).
- A batch with derived edges (reliability/columns.py: a spout's column emit, say) whose every
  row was acked with no child anchored travels back as its salt and roots alone: the acker makes
  the values again (reliability.columns.derived_acks), 8 bytes a row less on the way to it.
- Any other row sends its message as Storm's ack does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from squall.reliability.anchoring import Anchors


def ack_plan(batch: Any, failed: np.ndarray, n_failed: int,
             out_ack: np.ndarray) -> tuple[np.ndarray | None, list[tuple[int, int, int]]]:
    """The rows whose acks travel as messages (None: every row), and the derived parts acked
    whole, as (salt, first row, end row)."""
    parts = batch.row_parts()
    if all(derive is None and settle is None for derive, settle, _ in parts):
        return (np.flatnonzero(~failed) if n_failed else None), []
    explicit = ~failed
    whole = []
    a = 0
    for derive, settle, m in parts:
        b = a + m
        if settle is not None:
            explicit[a:b] &= out_ack[a:b] != 0
        elif derive is not None and not failed[a:b].any() and not out_ack[a:b].any():
            explicit[a:b] = False
            whole.append((derive, a, b))
        a = b
    return np.flatnonzero(explicit), whole


def whole_acks(anchors: Anchors, whole: list[tuple[int, int, int]]) -> list[tuple[int, np.ndarray]]:
    """(salt, roots) of each derived part acked whole."""
    return [(salt, anchors.root[anchors.off[a]:anchors.off[b]]) for salt, a, b in whole]
