"""What an executor returns for one wave, and the protocol every executor implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from squall.engine.tasks.task_result import Counters, TaskResult
from squall.observe.errors import ErrorRecord
from squall.reliability.batch import TupleBatch
from squall.reliability.pending import FailReason
from squall.reliability.settled import Sent, Settled, unsettled

_EMPTY_U = np.zeros(0, np.uint64)


Captured = dict[str, dict[str, dict[int, list]]]  # component -> stream -> task id -> emitted values


@dataclass
class WaveSummary:
    """What one run_wave did, as the driver's loop sees it (an idle wave made no progress)."""

    wave: int
    spout_emitted: int
    executed: int
    acked: int
    failed: int
    secs: float
    busy: bool = False  # work still out though this wave did none (waves in flight, acks held for a snapshot)

    @property
    def progressed(self) -> bool:
        return bool(self.spout_emitted or self.executed or self.acked or self.failed or self.busy)


@dataclass
class TaskStats:
    """A component's counters summed over its tasks (and waves)."""

    component: str
    counters: Counters = Counters()

    def add(self, counters: Counters) -> None:
        self.counters = self.counters.plus(counters)

    @property
    def executed(self) -> int:
        return self.counters.executed


def add_captured(into: Captured, component: str, task: int, per_stream: dict[str, list]) -> None:
    comp = into.setdefault(component, {})
    for stream, vals in per_stream.items():
        comp.setdefault(stream, {}).setdefault(task, []).extend(vals)


def merge_captured(into: Captured, other: Captured) -> None:
    for comp, streams in other.items():
        for stream, per_task in streams.items():
            for task, vals in per_task.items():
                add_captured(into, comp, task, {stream: vals})


@dataclass
class WaveOutput:
    """The acker's input for one wave (ack messages folded per root), failures, errors, stats."""

    ack_roots: np.ndarray = field(default_factory=lambda: _EMPTY_U)
    ack_vals: np.ndarray = field(default_factory=lambda: _EMPTY_U)
    fail_roots: list[int] = field(default_factory=list)
    fail_reasons: list[FailReason] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    stats: dict[str, TaskStats] = field(default_factory=dict)
    captured: Captured = field(default_factory=dict)  # only when capturing, for tests
    tasks: list[tuple[int, Counters]] = field(default_factory=list)  # (task id, its counters) for the UI
    metrics: list[tuple[str, int, dict]] = field(default_factory=list)  # (component, task, user metrics)
    sent: list[Sent] = field(default_factory=list)  # batches sent with no edge values (reliability/settled.py)
    settled: list[Settled] = field(default_factory=list)  # and those settled

    def add_stats(self, component: str, counters: Counters) -> None:
        self.stats.setdefault(component, TaskStats(component)).add(counters)

    def add_report(self, component: str, task: int, counters: Counters, errors: list, captured: dict | None,
                   metrics: dict | None) -> None:
        """One task's report of the wave: its counters, errors, captured emits and user metrics."""
        self.add_stats(component, counters)
        self.tasks.append((task, counters))
        self.errors.extend(errors)
        if captured:
            add_captured(self.captured, component, task, captured)
        if metrics:
            self.metrics.append((component, task, metrics))

    def add_result(self, res: TaskResult, counters: Counters | None = None) -> None:
        """One task's result; `counters` as the task counted them, when its outputs travel apart."""
        self.fail_roots.extend(res.fail_roots)
        self.fail_reasons.extend(res.fail_reasons)
        self.sent.extend(res.sent)
        self.settled.extend(res.settled)
        self.add_report(res.component, res.task, counters or res.counters, res.errors, res.captured, res.metrics)

    def finish(self, roots: list[np.ndarray], vals: list[np.ndarray]) -> WaveOutput:
        """The wave's ack messages, as its tasks gave them (concatenated here), then check_settled."""
        if roots:
            self.ack_roots = np.concatenate(roots)
            self.ack_vals = np.concatenate(vals)
        return self.check_settled()

    def check_settled(self) -> WaveOutput:
        """Raises WaveLost if a batch sent with no edge values was not settled whole (reliability/settled.py)."""
        astray = unsettled(self.sent, self.settled)
        if astray is not None:
            raise WaveLost(astray)
        return self

    @property
    def executed(self) -> int:
        return sum(s.executed for s in self.stats.values())


class WaveLost(RuntimeError):
    """The wave's job failed for good (a worker kept dying, say): its effects are discarded."""


def merge_outputs(outs: list[WaveOutput]) -> WaveOutput:
    if len(outs) == 1:
        return outs[0]
    out = WaveOutput()
    roots = [o.ack_roots for o in outs if len(o.ack_roots)]
    vals = [o.ack_vals for o in outs if len(o.ack_vals)]
    if roots:
        out.ack_roots, out.ack_vals = np.concatenate(roots), np.concatenate(vals)
    for o in outs:
        out.fail_roots.extend(o.fail_roots)
        out.fail_reasons.extend(o.fail_reasons)
        out.sent.extend(o.sent)
        out.settled.extend(o.settled)
        out.errors.extend(o.errors)
        for comp, st in o.stats.items():
            out.add_stats(comp, st.counters)
        merge_captured(out.captured, o.captured)
        out.tasks.extend(o.tasks)
        out.metrics.extend(o.metrics)
    return out


class Executor(Protocol):
    """Runs the bolts of a topology, one wave at a time."""

    default_wave_tuples: int

    def start(self) -> None: ...

    def run_wave(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int,
                 now: float | None = None) -> WaveOutput:
        """`now`: the topology clock at the wave's start (epoch secs, or simulated secs), which
        bolt tasks read as the wave's time (`TopologyContext.wave_time`)."""
        ...

    def stop(self) -> None: ...
