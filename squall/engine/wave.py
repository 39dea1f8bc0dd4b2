"""What an executor returns for one wave, and the protocol every executor implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from squall.engine.batch import TupleBatch
from squall.engine.task import TaskResult
from squall.observe.errors import ErrorRecord
from squall.reliability.pending import FailReason

_EMPTY_U = np.zeros(0, np.uint64)


@dataclass
class TaskStats:
    component: str
    executed: int = 0
    acked: int = 0
    failed: int = 0
    emitted: int = 0
    exec_secs: float = 0.0


@dataclass
class WaveOutput:
    """The acker's input for one wave (ack messages folded per root), failures, errors, stats."""

    ack_roots: np.ndarray = field(default_factory=lambda: _EMPTY_U)
    ack_vals: np.ndarray = field(default_factory=lambda: _EMPTY_U)
    fail_roots: list[int] = field(default_factory=list)
    fail_reasons: list[FailReason] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    stats: dict[str, TaskStats] = field(default_factory=dict)
    # component -> stream -> task id -> emitted values (only when capturing, for tests)
    captured: dict[str, dict[str, dict[int, list]]] = field(default_factory=dict)

    def add_result(self, res: TaskResult) -> None:
        st = self.stats.setdefault(res.component, TaskStats(res.component))
        st.executed += res.executed
        st.acked += res.acked
        st.failed += res.failed
        st.emitted += res.emitted
        st.exec_secs += res.exec_secs
        self.fail_roots.extend(res.fail_roots)
        self.fail_reasons.extend(res.fail_reasons)
        self.errors.extend(res.errors)
        if res.captured:
            comp = self.captured.setdefault(res.component, {})
            for stream, vals in res.captured.items():
                comp.setdefault(stream, {}).setdefault(res.task, []).extend(vals)

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
        out.errors.extend(o.errors)
        for comp, st in o.stats.items():
            t = out.stats.setdefault(comp, TaskStats(comp))
            t.executed += st.executed
            t.acked += st.acked
            t.failed += st.failed
            t.emitted += st.emitted
            t.exec_secs += st.exec_secs
        for comp, streams in o.captured.items():
            c = out.captured.setdefault(comp, {})
            for stream, per_task in streams.items():
                s = c.setdefault(stream, {})
                for task, v in per_task.items():
                    s.setdefault(task, []).extend(v)
    return out


class Executor(Protocol):
    """Runs the bolts of a topology, one wave at a time."""

    default_wave_tuples: int

    def start(self) -> None: ...

    def run_wave(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int) -> WaveOutput: ...

    def stop(self) -> None: ...
