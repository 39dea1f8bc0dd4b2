"""Rebinding a bolt's collector and context when the engine carries the bolt between waves.

The Spark engine keeps each bolt task's instance from wave to wave as bytes. Bolts usually keep
their collector and context in attributes (`self.collector = collector` in `prepare`); those
are not pickled: they pickle as "the collector (context) of the task being restored", and the
engine restores an instance inside `restoring(task)` so they are bound to the new task's own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_local = threading.local()


@contextmanager
def restoring(task: Any) -> Iterator[None]:
    """While unpickling an instance of `task`'s component: collectors and contexts bind to `task`."""
    prev = getattr(_local, "task", None)
    _local.task = task
    try:
        yield
    finally:
        _local.task = prev


def _task() -> Any:
    task = getattr(_local, "task", None)
    if task is None:
        raise RuntimeError("a collector or context can only be unpickled while squall restores a task")
    return task


def current_collector() -> Any:
    return _task().collector


def current_context() -> Any:
    return _task().context
