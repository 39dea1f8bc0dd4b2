"""Python's cyclic GC, tuned for waves: a wave allocates many short-lived containers (tuples,
value lists), and the default threshold (700) makes the collector run thousands of times a
wave over the same young objects.

Inside a task's run (a batch of inputs, or a spout's pulls for a wave) the collector is paused
altogether: what a run allocates is either handed on (outputs, held tuples) or dropped by
reference counting when the run ends; cycles it made wait for the next collection, which the
allocation thresholds trigger as usual once the run is over (that first collection then scans
what the run left alive)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

GEN0_THRESHOLD = 20000
_tuned = False
_refrozen = False


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


def freeze_after_first_task() -> None:
    """Once per process, after its first task: collect, then freeze again. That task imported
    most of what the process will use (pyarrow.compute and the like: tens of thousands of
    functions, dicts and descriptors), and PySpark's daemon runs a full `gc.collect()` after
    every task, which would scan all of them each time.
    Only when `tune_gc` tuned this process."""
    global _refrozen
    if not _tuned or _refrozen:
        return
    _refrozen = True
    gc.collect()
    gc.freeze()


@contextmanager
def gc_paused(enabled: bool = True) -> Iterator[None]:
    """No cyclic collection inside the block (when `enabled`, and the collector was on)."""
    if not enabled or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
