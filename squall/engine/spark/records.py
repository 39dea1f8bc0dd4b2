"""The records that travel between the partitions of a wave's stages (and to the driver).

A stage's output is (destination partition, record) pairs; the record's type says what it is.
Every record carries the wave it belongs to: a level's cached output (the carried State, and
what that wave sent on) is read again, whole, by the same level in the next wave, which takes
its State and ignores the rest, without a separate pass to split them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from squall.engine.fixed_parts import FixedPart
from squall.engine.task_result import Counters
from squall.reliability.batch import pack_steps, unpack_steps


class Inputs(NamedTuple):
    """Input batches (each a pickled TupleBatch) for the destination task (of the next level)."""

    wave: int
    batches: list


class Forward(NamedTuple):
    """Input (pickled TupleBatches) for task `partition` of a later `level`, passed on level by level."""

    wave: int
    level: int
    partition: int
    batches: list


class State(NamedTuple):
    """A task's carried instance (pickled), as of the end of `wave`: stays in its partition. Its
    fixed attributes (engine/fixed_parts.py) travel apart, as the bytes they were pickled to once."""

    wave: int
    blob: bytes
    fixed: FixedPart | None = None

    @property
    def size(self) -> int:
        fixed = self.fixed.blob if self.fixed is not None else None  # None too once in a file
        return len(self.blob) + (len(fixed) if fixed is not None else 0)


class Acks(NamedTuple):
    """Ack messages, already folded per root (so the roots are in order: they travel as small
    steps, reliability.batch.pack_steps, 1-2 bytes a root instead of 8)."""

    wave: int
    roots: np.ndarray
    xors: np.ndarray

    def __reduce__(self) -> tuple:
        return _acks, (self.wave, pack_steps(self.roots), self.xors)


def _acks(wave: int, roots: Any, xors: np.ndarray) -> Acks:
    return Acks(wave, unpack_steps(roots), xors)


class Fails(NamedTuple):
    """Failed roots and why."""

    wave: int
    roots: list[int]
    reasons: list


class Settles(NamedTuple):
    """Batches a task sent with no edge values, and such batches it settled (reliability/settled.py)."""

    wave: int
    sent: list
    settled: list


class Report(NamedTuple):
    """A task's counters, errors and (in tests) captured emits for the wave."""

    wave: int
    component: str
    task: int
    counters: Counters
    errors: list
    captured: Any
    metrics: Any = None  # the task's user metrics of the wave (squall.api.metrics.TaskMetrics.take)
    state_bytes: int = 0  # the size of the task's State after the wave (the driver picks how levels shuffle)
    state_from: int = 0  # the wave of the State its step started from, 0 for a new instance (state_chain.py)
    fixed_token: int = 0  # the token of the fixed attributes its State names, 0 for none (spark/fixed_files.py)
