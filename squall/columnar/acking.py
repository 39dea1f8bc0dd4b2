"""Which rows of a columnar task's input send an ack message (root, value): where a value must
travel.

A row of a batch that settles whole (reliability/settled.py) has no edge: it needs a message
only if the task anchored children to it (their edges are in its out-ack value). Any other row
sends its message as Storm's ack does.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def ack_rows(batch: Any, failed: np.ndarray, n_failed: int, out_ack: np.ndarray) -> np.ndarray | None:
    """The rows whose acks travel as messages (None: every row)."""
    parts = batch.row_parts()
    if all(settle is None for settle, _ in parts):
        return np.flatnonzero(~failed) if n_failed else None
    explicit = ~failed
    a = 0
    for settle, m in parts:
        if settle is not None:
            explicit[a:a + m] &= out_ack[a:a + m] != 0
        a += m
    return np.flatnonzero(explicit)
