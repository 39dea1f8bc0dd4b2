"""Python's cyclic GC, tuned for waves: a wave allocates many short-lived containers (tuples,
value lists), and the default threshold (700) makes the collector run thousands of times a
wave over the same young objects. Measured on word count: 1.7x the throughput."""

from __future__ import annotations

import gc

GEN0_THRESHOLD = 20000
_tuned = False


def tune_gc(conf: dict | None = None) -> None:
    """Once per process: freeze what exists (long-lived) and collect young objects less often.
    `squall.gc.tune: False` in the topology conf leaves the collector alone."""
    global _tuned
    if _tuned or (conf is not None and not conf.get("squall.gc.tune", True)):
        return
    _tuned = True
    gc.freeze()
    _, g1, g2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, max(g1, 20), max(g2, 50))
