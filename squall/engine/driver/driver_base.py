"""What every engine's driver keeps of a running topology, whoever runs its tasks: the effective
conf, counters and latencies per component, error records, what the UI shows, captured emits
(tests), the tick and checkpoint schedules, and the clock. The local engine's `Coordinator` runs
the tasks itself; the Spark engine's `ClusterDriver` has them run in slots and is told what they
did in reports. Both feed these figures the same way (`absorb_spout`, `absorb_tasks`)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np

from squall.api.config import Config, effective_conf
from squall.api.topology import StormTopology
from squall.engine.driver.checkpoints import CheckpointSchedule
from squall.engine.driver.ticks import TickSchedule
from squall.engine.driver.wave import Captured, add_captured, merge_captured
from squall.engine.tasks.spout_runner import SpoutFigures
from squall.engine.tasks.task_result import Counters
from squall.observe.errors import ErrorRecord
from squall.observe.stats import ComponentStats
from squall.observe.watch import TopologyWatch

log = logging.getLogger("squall")

MAX_ERRORS_KEPT = 1000
WAVE_TUPLES_CAP = 200_000  # spout tuples per wave at most, however cheap tuples are (memory)


class DriverBase:
    """A running topology's figures and schedules, on the driver."""

    def __init__(self, name: str, topology: StormTopology, conf: dict, clock: Any, capture: bool = False):
        self.name = name
        self.topology = topology
        self.conf = effective_conf(conf)  # already effective when submitted (idempotent)
        self.clock = clock
        self.capture = capture
        self.ackers = int(self.conf[Config.TOPOLOGY_ACKER_EXECUTORS] or 0)
        self.tracking = self.ackers > 0
        self.timeout = float(self.conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS])
        self.timeouts_on = bool(self.conf[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS]) and self.tracking
        self.max_pending = self.conf[Config.TOPOLOGY_MAX_SPOUT_PENDING]
        fixed = self.conf.get(Config.SQUALL_WAVE_MAX_TUPLES)
        self.wave_tuples = int(fixed) if fixed else None  # per spout task; None: sized by cost
        self.stats = {c: ComponentStats("spout" if s.is_spout else "bolt", s.parallelism)
                      for c, s in topology.specs.items()}
        self.errors: list[ErrorRecord] = []
        self.error_count = 0
        self.watch = TopologyWatch(list(topology.task_component), topology.task_component)  # what the UI shows
        self.captured: Captured = {}
        self.wave = 0
        self.waves_done = 0
        self.next_rotation = clock.now() + self.timeout
        self.ticks = TickSchedule(topology, self.conf, clock.now())
        self.checkpoints = CheckpointSchedule(topology, self.conf, clock.now())
        self.lock = threading.RLock()
        self.closed = False

    # -- figures ----------------------------------------------------------------------------

    def absorb_spout(self, task: int, component: str, f: SpoutFigures) -> None:
        """A spout task's figures since it was last asked: into the stats and the UI's windows."""
        stats = self.stats[component]
        stats.emitted += f.emitted
        stats.acked += f.acked
        stats.failed += f.failed
        if len(f.lat_bins):
            stats.complete.add_counts(f.lat_bins, f.lat_counts)
            stats.complete_sum += f.complete_secs
        if f.emitted or f.transferred or f.acked:
            self.watch.add(task, emitted=f.emitted, transferred=f.transferred, acked=f.acked,
                           complete_secs=f.complete_secs, complete_n=f.acked)
        if f.fail_kinds:
            self.watch.failed(task, f.fail_kinds)
        if f.captured:
            add_captured(self.captured, component, task, f.captured)
        if f.metrics:
            self.watch.metrics.add(component, task, f.metrics)
        self.record(f.errors)

    def absorb_tasks(self, stats: dict[str, Any], tasks: list[tuple[int, Counters]],
                     metrics: list[tuple[str, int, dict]], errors: list[ErrorRecord], captured: Captured) -> None:
        """Bolt tasks' counters, user metrics, errors and captured emits of a wave."""
        for comp, ts in stats.items():
            self.stats[comp].add_counters(*ts.counters)
        self.watch.add_counters(tasks)
        for comp, task, delta in metrics:
            self.watch.metrics.add(comp, task, delta)
        self.record(errors)
        merge_captured(self.captured, captured)

    def record(self, errors: list[ErrorRecord]) -> None:
        if not errors:
            return
        for e in errors:
            if e.component in self.stats:
                self.stats[e.component].errors += 1
                if e.task in self.watch.windows.row:
                    self.watch.add(e.task, errors=1)
            if e.kind != "lost":  # a lost wave has its own line, with its root count (lost_waves.py)
                log.warning("%s: %s", self.name, e)
        self.error_count += len(errors)
        self.errors.extend(errors)
        if len(self.errors) > MAX_ERRORS_KEPT:
            del self.errors[: len(self.errors) - MAX_ERRORS_KEPT]

    def stats_dict(self) -> dict[str, dict[str, Any]]:
        # Read without the wave lock: waves follow each other back to back and a reader would
        # starve; counters are plain ints, so a read between two of them is merely a bit stale.
        return {c: s.as_dict() for c, s in self.stats.items()}

    # -- time -------------------------------------------------------------------------------

    def wave_time(self) -> float:
        """The time bolt tasks see for this wave: the simulated clock, or the wall clock (epoch secs)."""
        return self.clock.now() if self.clock.simulated else time.time()

    def next_due(self) -> float | None:
        """The next time something is due on the clock: a timeout rotation, a tick or a checkpoint."""
        due = [d for d in (self.next_rotation if self.timeouts_on else None, self.ticks.next_due(),
                           self.checkpoints.next_due()) if d is not None]
        return min(due, default=None)

    def rotations_due(self) -> int:
        """How many timeout rotations are due on the clock now (and the next one moved on)."""
        if not self.timeouts_on:
            return 0
        now = self.clock.now()
        n = 0
        while now >= self.next_rotation:
            n += 1
            self.next_rotation += self.timeout
            if not self.clock.simulated and self.next_rotation <= now:
                # A long wave counts as progress for the trees in it: do not rotate twice for it.
                self.next_rotation = now + self.timeout
        return n


def concat_u64(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)
