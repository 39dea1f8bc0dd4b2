"""The records that travel between the partitions of a wave's stages (and to the driver).

A stage's output is (destination partition, record) pairs; the record's type says what it is.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from squall.engine.task_result import Counters


class Inputs(NamedTuple):
    """Input batches (each a pickled TupleBatch) for the destination task (of the next level)."""

    batches: list


class Forward(NamedTuple):
    """Input (pickled TupleBatches) for task `partition` of a later `level`, passed on level by level."""

    level: int
    partition: int
    batches: list


class State(NamedTuple):
    """A task's carried instance (pickled), as of the end of `wave`: stays in its partition."""

    wave: int
    blob: bytes


class Acks(NamedTuple):
    """Ack messages, already folded per root."""

    roots: np.ndarray
    xors: np.ndarray


class Fails(NamedTuple):
    """Failed roots and why."""

    roots: list[int]
    reasons: list


class Report(NamedTuple):
    """A task's counters, errors and (in tests) captured emits for the wave."""

    component: str
    task: int
    counters: Counters
    errors: list
    captured: Any
