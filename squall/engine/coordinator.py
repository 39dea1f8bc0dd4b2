"""The wave coordinator: the driver's loop. Each wave it asks every spout task for tuples,
runs them through the topology on an executor, folds the ack messages into the XOR ledger,
and calls `ack`/`fail` on the spouts. Timeouts rotate here, on the coordinator's clock.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Any

import numpy as np

from squall.api.config import Config, component_conf, effective_conf
from squall.api.topology import StormTopology
from squall.engine.checkpoints import CheckpointSchedule
from squall.engine.gc_tuning import gc_paused, tune_gc
from squall.engine.in_flight import BuiltWave, Done, InFlight
from squall.engine.lost_waves import LostWaves
from squall.engine.malloc_tuning import tune_malloc
from squall.engine.spout_task import SpoutTask
from squall.engine.ticks import TickSchedule
from squall.engine.wave import Captured, Executor, WaveOutput, WaveSummary, add_captured, merge_captured
from squall.engine.wave_sizing import WaveSizer
from squall.observe.dead_letter import make_sink
from squall.observe.errors import ErrorRecord
from squall.observe.stats import ComponentStats
from squall.observe.watch import TopologyWatch
from squall.reliability.batch import TupleBatch
from squall.reliability.ids import RootIdGenerator
from squall.reliability.ledger import XorLedger
from squall.reliability.pending import TIMEOUT, FailReason, PendingTrees

log = logging.getLogger("squall")

MAX_ERRORS_KEPT = 1000
WAVE_TUPLES_CAP = 200_000  # spout tuples per wave at most, however cheap tuples are (driver memory)


class Coordinator:
    """Drives one topology's waves."""

    def __init__(self, name: str, topology: StormTopology, conf: dict, executor: Executor, clock: Any,
                 capture: bool = False):
        self.name = name
        self.topology = topology
        self.conf = effective_conf(conf)  # already effective when submitted (idempotent)
        self.executor = executor
        self.clock = clock
        self.ackers = int(self.conf[Config.TOPOLOGY_ACKER_EXECUTORS] or 0)
        self.tracking = self.ackers > 0
        self.ledger = XorLedger(self.ackers) if self.tracking else None
        self.root_ids = RootIdGenerator(self.conf.get(Config.SQUALL_ROOT_SEED))
        self.timeout = float(self.conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS])
        self.timeouts_on = bool(self.conf[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS]) and self.tracking
        self.max_pending = self.conf[Config.TOPOLOGY_MAX_SPOUT_PENDING]
        fixed = self.conf.get(Config.SQUALL_WAVE_MAX_TUPLES)
        self.wave_tuples = int(fixed) if fixed else None  # per spout task; None: sized by cost
        self.wave_secs = float(self.conf[Config.SQUALL_WAVE_MAX_SECS])
        self.spouts: list[SpoutTask] = []
        for comp in topology.spouts:
            spec = topology.specs[comp]
            conf_c = component_conf(self.conf, spec)
            for i in range(spec.parallelism):
                self.spouts.append(SpoutTask(topology, comp, i, conf_c, copy.deepcopy(spec.obj), capture))
        self._spout_by_task = {s.task_id: s for s in self.spouts}
        self.pending = PendingTrees()  # root -> (spout task, msg id, emit time) of every pending tree
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
        self._spout_roots: list[tuple[np.ndarray, np.ndarray]] = []  # this wave's (roots, init values)
        self.lost = LostWaves(name, int(self.conf[Config.SQUALL_MAX_REPLAYS]), make_sink(self.conf),
                              self._replay_key, self._dead_letter, self._record)
        self._dead_roots: list[int] = []
        self.in_flight = InFlight(executor, self.conf[Config.SQUALL_WAVES_IN_FLIGHT], self.lost,
                                  self._run_job, self._next_wave, self.wave_time)
        self.sizer = None if fixed else WaveSizer(
            executor.default_wave_tuples, WAVE_TUPLES_CAP,
            min(float(self.conf[Config.SQUALL_WAVE_TARGET_SECS]), self.timeout / 4), self.in_flight.depth,
            getattr(executor, "min_wave_secs", 0.0))
        self.lock = threading.RLock()
        self.closed = False

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        tune_gc(self.conf)
        tune_malloc(self.conf)
        self.executor.start()
        for st in self.spouts:
            st.open()
            st.spout.activate()  # as Storm: an active topology's spouts are activated after open
            self._record(st.take_late_errors())

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with self.lock:  # waves still in flight end, and their verdicts reach the spouts
            self._settle(self.in_flight.drain())
        for st in self.spouts:
            try:
                st.spout.close()
            except Exception as e:  # noqa: BLE001
                self._record([ErrorRecord.from_exception(st.component, st.task_id, e)])
        self.executor.stop()

    def set_active(self, active: bool) -> None:
        with self.lock:  # between waves: a spout's callbacks never run concurrently
            self._set_active(active)

    def _set_active(self, active: bool) -> None:
        for st in self.spouts:
            if st.active != active:
                st.active = active
                (st.spout.activate if active else st.spout.deactivate)()

    @property
    def pending_count(self) -> int:
        return len(self.pending)

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
        """Build a wave and run it; with waves in flight, settle the ones whose jobs are done."""
        with self.lock:
            t0 = time.perf_counter()
            built = self._build_wave()
            done = self.in_flight.run(built)
            acked, failed, executed = self._settle(done)
            failed += self._rotate_if_due()
            secs = time.perf_counter() - t0
            if self.sizer is not None:
                self._observe(done, secs)
            self._end_watch()
            return WaveSummary(self.wave, built.emitted, executed, acked, failed, secs)

    def _observe(self, done: Done, secs: float) -> None:
        """The sizer learns what a wave costs from the time between two settled waves (it
        averages `depth` consecutive ones: with waves in flight they end unevenly). Waves that
        ended together cannot be told apart."""
        if len(done) == 1:
            built = done[0][0]
            self.sizer.observe(built.emitted, secs, built.full, built.probe)
        else:
            self.sizer.skip()

    def _build_wave(self) -> BuiltWave:
        """The driver's part of a wave: due ticks and checkpoints, then the spouts' pulls."""
        self.wave += 1
        # Ticks first: each due bolt task gets its tick before this wave's other inputs.
        outputs: list[tuple[int, TupleBatch]] = self.ticks.take_due(self.clock.now(), self.wave)
        early = self.tracking and self.checkpoints.held_up(len(self.pending), self.in_flight.waves,
                                                           self.max_pending, len(self.spouts))
        outputs.extend(self.checkpoints.take_due(self.clock.now(), self.wave, early))  # stateful bolts commit
        emitted = 0
        active = [st for st in self.spouts if st.active]
        budget, probe = self.wave_tuples, False
        if self.sizer is not None and active:
            total, probe = self.sizer.wave_budget()
            budget = -(-total // len(active))
        full = capped = False
        for st in active:
            res, allowed = self._call_spout(st, budget)
            emitted += res.emitted
            full = full or res.emitted >= budget
            capped = capped or allowed < budget and res.emitted >= allowed
            outputs.extend(res.outputs)
        empty = np.zeros(0, np.uint64)
        init_roots = np.concatenate([r for r, _ in self._spout_roots]) if self._spout_roots else empty
        init_vals = np.concatenate([v for _, v in self._spout_roots]) if self._spout_roots else empty
        self._spout_roots = []
        return BuiltWave(self.wave, outputs, init_roots, init_vals, emitted, full, capped, probe)

    def _settle(self, done: Done) -> tuple[int, int, int]:
        """Waves whose jobs ended: acks into the ledger, verdicts to the spouts."""
        acked = failed = executed = 0
        for built, out in done:
            self.lost.end_wave(built.wave)
            a, f = self._apply(out, built.init_roots, built.init_vals)
            acked, failed, executed = acked + a, failed + f, executed + out.executed
            self.waves_done += 1
        return acked, failed, executed

    def _end_watch(self) -> None:
        """The wave's figures into the UI's windows; the spouts' user metrics (they run here)."""
        for st in self.spouts:
            delta = st.context.metrics.take()
            if delta:
                self.watch.metrics.add(st.component, st.task_id, delta)
        self.watch.end_wave()

    def _call_spout(self, st: SpoutTask, budget: int) -> tuple[Any, int]:
        """One spout task's pulls for the wave, at most `budget` emits or what max pending leaves (returned)."""
        res = st.begin()
        if self.tracking and self.max_pending:
            budget = min(budget, int(self.max_pending) - self.pending.count(st.task_id))
        deadline = time.perf_counter() + self.wave_secs
        # No collection while the pulls' emits are made and turned into batches: what `end` drops
        # (each emit's record) is freed before the collector runs again, instead of being scanned
        # by the first collection after the pulls (8% of the driver's busy time on word count)
        with gc_paused(self.conf.get(Config.SQUALL_GC_TUNE, True)):
            if budget > 0:
                self._pull(st, res, budget, deadline)
            res, msg_ids, roots, vals, rejected = st.end(self.root_ids.take, self.tracking)
        stats = self.stats[st.component]
        stats.emitted += res.emitted
        self.watch.add(st.task_id, emitted=res.emitted, transferred=res.transferred)
        self._record(res.errors)
        if res.captured:
            add_captured(self.captured, st.component, st.task_id, res.captured)
        if self.tracking:
            if len(roots):
                self.pending.add(st.task_id, roots, msg_ids, self.clock.now())
                self._spout_roots.append((roots, vals))
                self.lost.remember(self.wave, st.component, st.task_id, roots, msg_ids, st.last_values)
        elif msg_ids:  # no ackers: at-most-once, acked as soon as emitted (ack_batch once, or ack each)
            self._record(st.ack(msg_ids))
        for m, reason in rejected:  # values that cannot reach a bolt: failed at once, never sent
            stats.failed += 1
            self.watch.failed(st.task_id, [reason.kind])
            self._spout_fail(st, m, reason)
        return res, budget

    @staticmethod
    def _pull(st: SpoutTask, res: Any, budget: int, deadline: float) -> None:
        """Call next_tuple until the wave's budget is emitted, the spout has nothing, or time is up."""
        next_tuple = st.spout.next_tuple
        coll = st.collector
        count = coll.recorded_count
        while count < budget:  # the count read once a call: it was 3 reads, ~1 us a tuple
            try:
                next_tuple()
            except Exception as e:  # noqa: BLE001 - a spout error is reported, the topology goes on
                res.errors.append(ErrorRecord.from_exception(st.component, st.task_id, e, kind="error"))
                break
            after = coll.recorded_count
            if after == count or time.perf_counter() > deadline:
                break
            count = after

    # -- lost waves (the policy is squall.engine.lost_waves) ---------------------------------

    def _run_job(self, outputs: list[tuple[int, TupleBatch]]) -> WaveOutput:
        return self.executor.run_wave(outputs, self.wave, self.wave_time())

    def wave_time(self) -> float:
        """The time bolt tasks see for this wave: the simulated clock, or the wall clock (epoch secs)."""
        return self.clock.now() if self.clock.simulated else time.time()

    def _next_wave(self) -> int:
        self.wave += 1
        return self.wave

    def _replay_key(self, task: int, msg_id: Any) -> Any:
        # A spout that replays under new msg ids (Trident: an attempt number) says what stays the same.
        replay_key = getattr(self._spout_by_task[task].spout, "replay_key", None)  # Spout.replay_key
        return replay_key(msg_id) if replay_key is not None else msg_id

    def _dead_letter(self, root: int, task: int, msg_id: Any) -> None:
        """A dead-lettered root: handled, not replayed. Forget it and ack it at its spout."""
        self._dead_roots.append(root)  # started in the ledger with this wave, forgotten right after
        self.pending.pop_many(np.array([root], np.uint64))
        self._spout_ack(self._spout_by_task[task], msg_id)

    def _apply(self, out: WaveOutput, init_roots: np.ndarray, init_vals: np.ndarray) -> tuple[int, int]:
        for comp, ts in out.stats.items():
            self.stats[comp].add_counters(*ts.counters)
        self.watch.add_counters(out.tasks)
        for comp, task, delta in out.metrics:
            self.watch.metrics.add(comp, task, delta)
        self._record(out.errors)
        merge_captured(self.captured, out.captured)
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
        if not self.timeouts_on:
            return 0
        now = self.clock.now()
        failed = 0
        while now >= self.next_rotation:
            expired = self.ledger.rotate()
            failed += self._finish(expired, now, {}, default=TIMEOUT)
            self.next_rotation += self.timeout
            if not self.clock.simulated and self.next_rotation <= now:
                # A long wave counts as progress for the trees in it: do not rotate twice for it.
                self.next_rotation = now + self.timeout
        return failed

    def _finish(self, roots: np.ndarray, now: float, reasons: dict[int, FailReason] | None,
                default: FailReason | None = None) -> int:
        """Call ack (reasons None) or fail on the spout task that owns each root."""
        if not len(roots):
            return 0
        n = 0
        for task, popped in self.pending.pop_many(roots).items():
            st = self._spout_by_task[task]
            stats = self.stats[st.component]
            k = len(popped.msg_ids)
            if reasons is None:
                lat = now - popped.times
                stats.complete.add(lat)
                stats.complete_sum += float(lat.sum())
                stats.acked += k
                self.watch.add(task, acked=k, complete_secs=float(lat.sum()), complete_n=k)
                self.lost.acked_many(task, popped.msg_ids)
                self._record(st.ack(popped.msg_ids))
            else:
                stats.failed += k
                why = [reasons.get(r, default or FailReason("failed")) for r in popped.roots.tolist()]
                self.watch.failed(task, [w.kind for w in why])
                for m, reason in zip(popped.msg_ids, why):
                    self._spout_fail(st, m, reason)
            n += k
        return n

    def _spout_ack(self, st: SpoutTask, msg_id: Any) -> None:
        self._record(st.ack([msg_id]))

    def _spout_fail(self, st: SpoutTask, msg_id: Any, reason: FailReason) -> None:
        self._record(st.fail(msg_id, reason))

    def _record(self, errors: list[ErrorRecord]) -> None:
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

    # -- time -----------------------------------------------------------------------------

    def next_due(self) -> float | None:
        """The next time something is due on the clock: a timeout rotation, a tick or a checkpoint."""
        due = [d for d in (self.next_rotation if self.timeouts_on else None, self.ticks.next_due(),
                           self.checkpoints.next_due()) if d is not None]
        return min(due, default=None)

    def fire_due(self) -> int:
        """Fire timeouts that are due on the clock now."""
        with self.lock:
            return self._rotate_if_due()

    def stats_dict(self) -> dict[str, dict[str, Any]]:
        # Read without the wave lock: waves follow each other back to back and a reader would
        # starve; counters are plain ints, so a read between two of them is merely a bit stale.
        return {c: s.as_dict() for c, s in self.stats.items()}
