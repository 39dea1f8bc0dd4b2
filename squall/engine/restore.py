"""Carrying a bolt task's instance from wave to wave as bytes (the Spark engine keeps them in
cached partitions). A bolt often keeps its collector and context in attributes; those are
not pickled: they stand for "the collector of the task being restored" and are rebound."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_local = threading.local()


@contextmanager
def restoring(task: Any) -> Iterator[None]:
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
