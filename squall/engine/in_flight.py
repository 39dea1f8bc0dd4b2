"""Waves in flight (`squall.waves.in.flight`): on an executor that can run several waves' jobs at
once (Spark's `submit_wave`), the driver builds the next wave (ticks, checkpoints, spout pulls)
and submits it while the one before still runs, instead of waiting with the cores idle in
between. That pays under a heavy load only (the spouts fill their waves, or max spout pending
cuts them short): a wave they did not fill is waited for at once, as the one wave running, so
light loads keep their latency. Each task of a wave takes its State from the previous wave's
output, so the executor orders a task's waves; the driver settles waves in the order they were
submitted.

When a wave is lost, the waves submitted after it built on its state. Their jobs are dropped
(whatever they did is thrown away with their output), the executor is back on the last good
state, the lost wave goes through the lost-wave policy (squall.engine.lost_waves) and the
dropped waves run again, one at a time and in order, under new wave numbers: no wave's inputs
are applied twice, and only the lost wave's roots fail.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from squall.engine.lost_waves import LostWaves, RunJob
from squall.engine.wave import WaveLost, WaveOutput
from squall.reliability.batch import TupleBatch


@dataclass
class BuiltWave:
    """A wave as the driver built it: its inputs, its spout roots, and its job once submitted."""

    wave: int
    outputs: list[tuple[int, TupleBatch]]
    init_roots: np.ndarray
    init_vals: np.ndarray
    emitted: int
    full: bool  # a spout emitted its whole budget (it had more): what the wave sizer grows on
    capped: bool = False  # max spout pending cut a spout's budget, and it emitted all that was left
    probe: bool = False  # the wave sizer gave it a probe's budget
    job: Any = None  # the executor's submitted wave (result() / drop())


Done = list[tuple[BuiltWave, WaveOutput]]


class InFlight:
    """The waves submitted and not yet settled, at most `depth` of them."""

    def __init__(self, executor: Any, depth: Any, lost: LostWaves, run_job: RunJob,
                 next_wave: Callable[[], int], wave_time: Callable[[], float]):
        self.executor = executor
        try:
            n = int(1 if depth is None else depth)
        except (TypeError, ValueError):
            n = 0
        if n < 1 or isinstance(depth, float) and depth != n:
            raise ValueError(f"squall.waves.in.flight must be a whole number >= 1 (1: one wave at a time), "
                             f"got {depth!r}")
        self.depth = n if hasattr(executor, "submit_wave") else 1
        self.lost = lost
        self.run_job = run_job
        self.next_wave = next_wave
        self.wave_time = wave_time
        self.waves: deque[BuiltWave] = deque()
        self.submitted_behind = 0  # waves submitted while another was still running
        self.rerun = 0  # waves dropped because one before them was lost, and run again

    def __len__(self) -> int:
        return len(self.waves)

    def run(self, built: BuiltWave) -> Done:
        """Take a wave; give back the waves that are done now, oldest first."""
        if self.depth == 1:
            out = self.lost.run(self.run_job, self.next_wave, built.outputs, built.init_roots) if built.outputs \
                else WaveOutput()
            return [(built, out)]
        if not built.outputs:  # nothing to run: the spouts are quiet, so let what runs finish
            return [*self.drain(), (built, WaveOutput())]
        built.job = self.executor.submit_wave(built.outputs, built.wave, self.wave_time())
        self.submitted_behind += bool(self.waves)
        self.waves.append(built)
        # A wave the spouts did not fill (a light load) is waited for at once: another wave would
        # only share the cores with it and hold its tuples longer. One max spout pending cut
        # short is a heavy load (the spouts had more): waiting for it emptied the pipeline every
        # other wave (columnar word count: no job running 16% of the time, against 3% unacked).
        keep = self.depth - 1 if built.full or built.capped else 0
        done: Done = []
        while len(self.waves) > keep:
            done.extend(self._settle_oldest())
        return done

    def drain(self) -> Done:
        done: Done = []
        while self.waves:
            done.extend(self._settle_oldest())
        return done

    def _settle_oldest(self) -> Done:
        first = self.waves.popleft()
        try:
            return [(first, first.job.result())]
        except WaveLost as e:
            later = list(self.waves)
            self.waves.clear()
            for b in later:
                b.job.drop()
            done = [(first, self.lost.after_loss(e, self.run_job, self.next_wave, first.outputs, first.init_roots))]
            for b in later:
                self.rerun += 1
                self.next_wave()
                done.append((b, self.lost.run(self.run_job, self.next_wave, b.outputs, b.init_roots)))
            return done
