"""What one task produced in one wave, as the executors pass it on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from squall.observe.errors import ErrorRecord
from squall.reliability.batch import TupleBatch
from squall.reliability.pending import FailReason
from squall.reliability.settled import Sent, Settled


class Counters(NamedTuple):
    """A task's (or component's) work counters for a wave."""

    executed: int = 0
    acked: int = 0
    failed: int = 0
    emitted: int = 0
    exec_secs: float = 0.0
    transferred: int = 0  # tuples sent to tasks (one per target task)
    proc_secs: float = 0.0  # execute plus the batch's anchoring and ack bookkeeping

    def plus(self, other: Counters) -> Counters:
        return Counters(*(a + b for a, b in zip(self, other)))


@dataclass
class TaskResult:
    """Everything a task produced in one wave."""

    component: str
    task: int
    outputs: list[tuple[int, TupleBatch]] = field(default_factory=list)  # (target task id, batch)
    ack_roots: list[np.ndarray] = field(default_factory=list)
    ack_vals: list[np.ndarray] = field(default_factory=list)
    fail_roots: list[int] = field(default_factory=list)
    fail_reasons: list[FailReason] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    executed: int = 0
    acked: int = 0
    failed: int = 0
    emitted: int = 0
    exec_secs: float = 0.0
    proc_secs: float = 0.0
    captured: dict[str, list[list]] | None = None
    metrics: dict | None = None  # the task's user metrics of this wave (squall.api.metrics.TaskMetrics.take)
    sent: list[Sent] = field(default_factory=list)  # batches sent with no edge values (reliability/settled.py)
    settled: list[Settled] = field(default_factory=list)  # such batches this task settled

    @property
    def transferred(self) -> int:
        return sum(len(b) for _, b in self.outputs)

    @property
    def counters(self) -> Counters:
        return Counters(self.executed, self.acked, self.failed, self.emitted, self.exec_secs, self.transferred,
                        self.proc_secs)
