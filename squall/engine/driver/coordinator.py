"""The local engine's wave coordinator: the driver's loop, with every task in this process. Each
wave it asks every spout task for tuples, runs them through the topology on an executor, folds
the ack messages into the XOR ledger, and calls `ack`/`fail` on the spouts. Timeouts rotate
here, on the coordinator's clock. (The Spark engine's driver is squall.engine.resident.driver:
there the spouts, bolts and ackers run in slots.)
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from squall.api.config import Config, component_conf
from squall.api.topology import StormTopology
from squall.engine.driver.driver_base import WAVE_TUPLES_CAP, DriverBase, concat_u64
from squall.engine.driver.lost_waves import LostWaves
from squall.engine.driver.wave import Executor, WaveOutput, WaveSummary
from squall.engine.driver.wave_sizing import WaveSizer
from squall.engine.gc_tuning import tune_gc
from squall.engine.malloc_tuning import tune_malloc
from squall.engine.tasks.spout_runner import SpoutRunner
from squall.engine.tasks.spout_task import SpoutTask
from squall.observe.dead_letter import make_sink
from squall.observe.errors import ErrorRecord
from squall.reliability.batch import TupleBatch
from squall.reliability.ids import root_owner
from squall.reliability.ledger import XorLedger
from squall.reliability.pending import TIMEOUT, FailReason


@dataclass
class BuiltWave:
    """A wave as the driver built it: its inputs, and the spout roots it starts."""

    wave: int
    outputs: list[tuple[int, TupleBatch]]
    init_roots: np.ndarray
    init_vals: np.ndarray
    emitted: int
    full: bool  # a spout emitted its whole budget (it had more): what the wave sizer grows on
    capped: bool = False  # max spout pending cut a spout's budget, and it emitted all that was left
    probe: bool = False  # the wave sizer gave it a probe's budget


class Coordinator(DriverBase):
    """Drives one topology's waves."""

    def __init__(self, name: str, topology: StormTopology, conf: dict, executor: Executor, clock: Any,
                 capture: bool = False):
        super().__init__(name, topology, conf, clock, capture)
        self.executor = executor
        self.ledger = XorLedger(self.ackers) if self.tracking else None
        self.wave_secs = float(self.conf[Config.SQUALL_WAVE_MAX_SECS])
        self.spouts: list[SpoutTask] = []
        self.runners: dict[int, SpoutRunner] = {}
        for comp in topology.spouts:
            spec = topology.specs[comp]
            conf_c = component_conf(self.conf, spec)
            for i in range(spec.parallelism):
                st = SpoutTask(topology, comp, i, conf_c, copy.deepcopy(spec.obj), capture)
                self.spouts.append(st)
                self.runners[st.task_id] = SpoutRunner(st, conf_c, self.tracking)
        self._spout_roots: list[tuple[np.ndarray, np.ndarray]] = []  # this wave's (roots, init values)
        self.lost = LostWaves(name, int(self.conf[Config.SQUALL_MAX_REPLAYS]), make_sink(self.conf),
                              self._replay_key, self._dead_letter, self.record)
        self._dead_roots: list[int] = []
        self.sizer = None if self.wave_tuples else WaveSizer(
            executor.default_wave_tuples, WAVE_TUPLES_CAP,
            min(float(self.conf[Config.SQUALL_WAVE_TARGET_SECS]), self.timeout / 4))

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        tune_gc(self.conf)
        tune_malloc(self.conf)
        self.executor.start()
        for st in self.spouts:
            st.open()
            st.spout.activate()  # as Storm: an active topology's spouts are activated after open
            self.record(st.take_late_errors())

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for st in self.spouts:
            try:
                st.spout.close()
            except Exception as e:  # noqa: BLE001
                self.record([ErrorRecord.from_exception(st.component, st.task_id, e)])
        self.executor.stop()

    def set_active(self, active: bool) -> None:
        with self.lock:  # between waves: a spout's callbacks never run concurrently
            for st in self.spouts:
                if st.active != active:
                    st.active = active
                    (st.spout.activate if active else st.spout.deactivate)()

    @property
    def active(self) -> bool:
        """Whether the spouts are active (the UI's status)."""
        return any(st.active for st in self.spouts)

    @property
    def pending_count(self) -> int:
        return sum(len(r.pending) for r in self.runners.values())

    @property
    def lost_waves(self) -> int:
        return self.lost.lost_waves

    @property
    def dead_lettered(self) -> int:
        return self.lost.dead_lettered

    def spout_instances(self, component: str | None = None) -> list[Any]:
        """The running spout instances (of one component, or all): e.g. to ask a spout whether it is idle."""
        return [st.spout for st in self.spouts if component is None or st.component == component]

    # -- one wave -------------------------------------------------------------------------

    def run_wave(self) -> WaveSummary:
        """Build a wave, run it (a lost one through the lost-wave policy), settle it."""
        with self.lock:
            t0 = time.perf_counter()
            built = self._build_wave()
            out = self.lost.run(self._run_job, self._next_wave, built.outputs, built.init_roots) if built.outputs \
                else WaveOutput()
            acked, failed, executed = self._settle([(built, out)])
            failed += self._rotate_if_due()
            secs = time.perf_counter() - t0
            if self.sizer is not None:
                self.sizer.observe(built.emitted, secs, built.full, built.probe)
            self._end_watch()
            return WaveSummary(self.wave, built.emitted, executed, acked, failed, secs)

    def _build_wave(self) -> BuiltWave:
        """The driver's part of a wave: due ticks and checkpoints, then the spouts' pulls."""
        self.wave += 1
        # Ticks first: each due bolt task gets its tick before this wave's other inputs.
        outputs: list[tuple[int, TupleBatch]] = self.ticks.take_due(self.clock.now(), self.wave)
        early = self.tracking and self.checkpoints.held_up(self.pending_count, [], self.max_pending,
                                                           len(self.spouts))
        outputs.extend(self.checkpoints.take_due(self.clock.now(), self.wave, early))  # stateful bolts commit
        emitted = 0
        active = [self.runners[st.task_id] for st in self.spouts if st.active]
        budget, probe = self.wave_tuples, False
        if self.sizer is not None and active:
            total, probe = self.sizer.wave_budget()
            budget = -(-total // len(active))
        full = capped = False
        now = self.clock.now()
        for runner in active:
            got = runner.pull(budget, now)
            emitted += got.emitted
            full = full or got.full
            capped = capped or got.capped
            outputs.extend(got.outputs)
            if len(got.roots):
                self._spout_roots.append((got.roots, got.init_vals))
                self.lost.remember(self.wave, runner.component, runner.task_id, got.roots, got.msg_ids, got.values)
        init_roots = concat_u64([r for r, _ in self._spout_roots])
        init_vals = concat_u64([v for _, v in self._spout_roots])
        self._spout_roots = []
        return BuiltWave(self.wave, outputs, init_roots, init_vals, emitted, full, capped, probe)

    def _settle(self, done: list[tuple[BuiltWave, WaveOutput]]) -> tuple[int, int, int]:
        """Waves whose jobs ended: acks into the ledger, verdicts to the spouts."""
        acked = failed = executed = 0
        for built, out in done:
            self.lost.end_wave(built.wave)
            a, f = self._apply(out, built.init_roots, built.init_vals)
            acked, failed, executed = acked + a, failed + f, executed + out.executed
            self.waves_done += 1
        return acked, failed, executed

    def _end_watch(self) -> None:
        """The spouts' figures of the wave into the stats and the UI's windows."""
        for runner in self.runners.values():
            self.absorb_spout(runner.task_id, runner.component, runner.take_figures())
        self.watch.end_wave()

    # -- lost waves (the policy is squall.engine.driver.lost_waves) ---------------------------------

    def _run_job(self, outputs: list[tuple[int, TupleBatch]]) -> WaveOutput:
        return self.executor.run_wave(outputs, self.wave, self.wave_time())

    def _next_wave(self) -> int:
        self.wave += 1
        return self.wave

    def _replay_key(self, task: int, msg_id: Any) -> Any:
        # A spout that replays under new msg ids (Trident: an attempt number) says what stays the same.
        replay_key = getattr(self.runners[task].spout, "replay_key", None)  # Spout.replay_key
        return replay_key(msg_id) if replay_key is not None else msg_id

    def _dead_letter(self, root: int, task: int, msg_id: Any) -> None:
        """A dead-lettered root: handled, not replayed. Forget it and ack it at its spout."""
        self._dead_roots.append(root)  # started in the ledger with this wave, forgotten right after
        runner = self.runners[task]
        runner.forget(np.array([root], np.uint64))
        runner.ack_one(msg_id)

    def _apply(self, out: WaveOutput, init_roots: np.ndarray, init_vals: np.ndarray) -> tuple[int, int]:
        self.absorb_tasks(out.stats, out.tasks, out.metrics, out.errors, out.captured)
        if not self.tracking:
            return 0, 0
        fail_roots = np.array(out.fail_roots, np.uint64)
        verdicts = self.ledger.apply(init_roots, init_vals, out.ack_roots, out.ack_vals, fail_roots)
        if self._dead_roots:
            self.ledger.forget(np.array(self._dead_roots, np.uint64))
            self._dead_roots = []
        now = self.clock.now()
        acked = self._finish(verdicts.completed, now, None)
        reasons: dict[int, FailReason] = {}
        for r, why in zip(out.fail_roots, out.fail_reasons):
            reasons.setdefault(r, why)
        failed = self._finish(verdicts.failed, now, reasons)
        return acked, failed

    def _rotate_if_due(self) -> int:
        failed = 0
        for _ in range(self.rotations_due()):
            failed += self._finish(self.ledger.rotate(), self.clock.now(), {}, default=TIMEOUT)
        return failed

    def _finish(self, roots: np.ndarray, now: float, reasons: dict[int, FailReason] | None,
                default: FailReason | None = None) -> int:
        """Call ack (reasons None) or fail on the spout task that owns each root."""
        if not len(roots):
            return 0
        n = 0
        owners = root_owner(roots)
        for task in np.unique(owners).tolist():
            runner = self.runners.get(task)
            if runner is None:
                continue
            mine = roots[owners == task] if len(self.runners) > 1 else roots
            if reasons is None:
                acked, _ = runner.apply(mine, mine[:0], None, now)
                self.lost.acked_many(task, acked)
                n += len(acked)
            else:
                n += runner.apply(mine[:0], mine, reasons, now, default)[1]
        return n

    # -- time -----------------------------------------------------------------------------

    def fire_due(self) -> int:
        """Fire timeouts that are due on the clock now."""
        with self.lock:
            return self._rotate_if_due()
