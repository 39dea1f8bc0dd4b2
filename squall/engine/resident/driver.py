"""The Spark engine's driver for one topology (docs/design.md): it places every task in a slot of
the pool, starts each wave with a marker to the topology's slots, and reads one report per slot and
wave back. Spouts, bolts and ackers run in the slots, and tuples go from slot to slot; what the
driver does per wave does not grow with the number of tuples. Spouts that declare
`DRIVER_BOUND = True` run here, and the driver takes part in level 0 of every wave for them, as
a slot does (`driver_spouts`). Where tasks run is `placement`; snapshots, rollbacks and re-runs
are `recovery`.
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from squall.api.config import Config
from squall.api.topology import StormTopology
from squall.engine.driver.driver_base import WAVE_TUPLES_CAP, DriverBase
from squall.engine.driver.wave import Captured, TaskStats, WaveSummary, merge_captured
from squall.engine.driver.wave_sizing import WaveSizer
from squall.engine.gc_tuning import tune_gc
from squall.engine.malloc_tuning import tune_malloc
from squall.engine.resident.balance import ShuffleBalance
from squall.engine.resident.driver_spouts import DriverSpouts
from squall.engine.resident.in_flight import WavesInFlight
from squall.engine.resident.messages import DRIVER, Marker, Report
from squall.engine.resident.placement import Placement, Placing, TopologyStopped
from squall.engine.resident.pool import SlotPool
from squall.engine.resident.recovery import Logged, SlotFailed, WaveRecovery
from squall.engine.resident.snapshots import SnapshotStore
from squall.engine.tasks.task_result import Counters
from squall.observe.errors import ErrorRecord

log = logging.getLogger("squall")


@dataclass
class OpenWave:
    """A wave the driver started and has not had every report of."""

    marker: Marker
    reports: list[Report] = field(default_factory=list)
    emitted: int = 0
    full: bool = False
    capped: bool = False


class ClusterDriver(Placing, DriverSpouts, WaveRecovery, DriverBase):
    """A topology whose tasks run in the slots of `pool`."""

    default_wave_tuples = 2000
    # Under a heavy load a wave lasts at least this long (squall.engine.driver.wave_sizing): the sizer's
    # a + b n fit sees a wave's fixed cost as a few ms, but a small wave pays more (each task's
    # per-batch work), and under a full load max pending bounds latency anyway.
    min_wave_secs = 0.3

    def __init__(self, name: str, topology: StormTopology, conf: dict, clock: Any, pool: SlotPool,
                 capture: bool = False, engine: str = "spark", ui_url: str | None = None):
        super().__init__(name, topology, conf, clock, capture)
        self.uid = uuid.uuid4().hex
        self.pool = pool
        self.engine = engine  # what the UI says runs it
        self.ui_url = ui_url
        self.executor = self  # the UI and CLI read `engine` and `ui_url` there
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.placement = Placement.of(topology, pool.count, self.ackers)
        self.in_flight = WavesInFlight(self.conf, self.tracking, self.max_pending, bool(self.placement.driver_spouts))
        self.sizer = None if self.wave_tuples else WaveSizer(
            self.default_wave_tuples, WAVE_TUPLES_CAP, min(float(self.conf[Config.SQUALL_WAVE_TARGET_SECS]),
                                                           self.timeout / 4), self.in_flight.depth, self.min_wave_secs)
        self._make_driver_spouts()
        self.executor_spouts = sorted(self.placement.spouts)
        self.participants: list[int] = []
        self.active = True
        self.epoch = 0
        self.open_waves: OrderedDict[int, OpenWave] = OrderedDict()
        self.completed_through = 0  # every wave up to this one has all its reports
        self.pending_by_task: dict[int, int] = {}
        self.acker_pending = 0
        self.held = 0
        self.verdicts_heard: dict[int, int] = {}
        self.verdicts_through = 0
        self.busy_secs: dict[int, float] = {}  # slot -> seconds its tasks took (profiling)
        self.balance = ShuffleBalance.of(topology, self.conf)  # load-aware shuffle
        self._peer_bytes: dict[int, int] = {}  # slot -> bytes its process sent the other slots
        self._last_full = False
        self._crash: str | None = None
        self._dead: set[int] = set()  # slots found dead, not yet rolled back from
        self._last_death = ""  # the last of them, as a lost wave's error names it
        self._loaded: set[int] = set()
        self._replies: dict[int, list] = {}  # request id -> the slots' answers (copies, kept roots)
        self._reply_cond = threading.Condition()
        self._reply_ids = 0
        self._init_recovery(pool)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        tune_gc(self.conf)
        tune_malloc(self.conf)
        self.store = SnapshotStore.of(self.conf, self.uid)
        self._probe = self.store.write_probe()
        self.pool.join(self)
        try:
            self._load(self._setup_blob(), self._participants_of(self.placement))
        except SlotFailed as e:
            self.pool.leave(self)
            raise TopologyStopped(f"topology {self.name!r} could not start: slot(s) {e} died while loading it") from e
        except BaseException:
            self.pool.leave(self)
            raise
        for st in self.spouts:
            st.open()
            st.spout.activate()  # as Storm: an active topology's spouts are activated after open
            self.record(st.take_late_errors())

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with self.lock:  # waves still in flight end, and their verdicts reach the spouts
            try:
                self._wait(0)
            except (TopologyStopped, SlotFailed):
                pass
        for st in self.spouts:
            try:
                st.spout.close()
            except Exception as e:  # noqa: BLE001
                self.record([ErrorRecord.from_exception(st.component, st.task_id, e)])
        self.pool.leave(self)
        if self.store is not None:
            self.store.remove()

    def set_active(self, active: bool) -> None:
        with self.lock:  # between waves: a spout's callbacks never run concurrently
            self.active = active
            for st in self.spouts:
                if st.active != active:
                    st.active = active
                    (st.spout.activate if active else st.spout.deactivate)()
            for s in self.spout_slots:
                if s != DRIVER:
                    self.pool.slots[s].send(("active", self.uid, active))

    @property
    def pending_count(self) -> int:
        return sum(self.pending_by_task.values()) + sum(len(r.pending) for r in self.runners.values())

    @property
    def captured(self) -> Captured:
        """Captured emits (tests) of the run that stands: a rollback takes back those of the waves
        after the snapshot (the waves run again emit them again)."""
        out = copy.deepcopy(self._captured)
        for n in sorted(self._captured_since):
            merge_captured(out, self._captured_since[n])
        return out

    @captured.setter
    def captured(self, value: Captured) -> None:
        self._captured = value

    def peer_bytes(self) -> int:
        """What the slots' processes sent each other, as of their last reports."""
        return sum(self._peer_bytes.values())

    # -- messages from the slots (their readers' threads) ---------------------------------

    def on_message(self, slot: int, msg: tuple) -> None:
        if msg[0] in ("copy", "kept_roots"):
            with self._reply_cond:
                self._replies.setdefault(msg[2], []).append(msg[3])
                self._reply_cond.notify_all()
            return
        self.inbox.put((slot, msg))

    def on_slot_lost(self, slot: int) -> None:
        self.inbox.put((slot, ("slot_lost", self.uid, slot)))

    def on_slot_back(self, slot: int) -> None:
        pass

    def _handle(self, slot: int, msg: tuple) -> None:
        kind = msg[0]
        if kind == "report":
            _, _, epoch, rep = msg
            if epoch == self.epoch:
                self._report(rep)
        elif kind == "verdicts":
            _, _, epoch, n, _sender, parts = msg
            if epoch == self.epoch:
                self._verdicts(n, parts)
        elif kind == "loaded":
            self._loaded.add(slot)
        elif kind == "dead_letters":
            for record in msg[2]:
                self.sink.write(record)
                self.dead_lettered += 1
                log.error("%s: %s[%d] msg %r dead-lettered after %d lost waves: %s", self.name, record["component"],
                          record["task"], record["msg_id"], record["attempts"], record["error"])
        elif kind in ("failed", "unreadable"):
            self._crash = f"slot {slot} failed: {msg[3]}"
        elif kind == "slot_lost":
            self._loaded.discard(slot)
            if slot in self.participants:
                self._dead.add(slot)
                self._last_death = self.pool.slots[slot].last_death
        elif kind == "peer_gone":
            _, reporter, peer, _inc = msg
            if peer in self.participants and reporter in self.participants and not self.pool.slots[peer].alive:
                self._dead.add(peer)

    # -- one wave -------------------------------------------------------------------------

    def run_wave(self) -> WaveSummary:
        """Start a wave; with waves in flight, take the reports of those that are done."""
        with self.lock:
            t0 = time.perf_counter()
            self._drain()
            summary = WaveSummary(self.wave + 1, 0, 0, 0, 0, 0.0)
            try:
                self._check()
                self._start_wave()
                done = self._wait(self.in_flight.left_open(self._last_full))
                self._sum(summary, done)
                summary.busy = bool(self.open_waves)  # a wave still in flight: its work is to come
            except SlotFailed:
                done = self._recover()
                self._sum(summary, done)
                summary.busy = True
            secs = summary.secs = time.perf_counter() - t0
            for runner in self.runners.values():
                f = runner.take_figures()
                summary.acked += f.acked
                summary.failed += f.failed
                self.absorb_spout(runner.task_id, runner.component, f)
            summary.busy = summary.busy or self.held > 0  # acks held for a snapshot: work still out
            if self.sizer is not None:
                if len(done) == 1:
                    self.sizer.observe(done[0].emitted, secs, done[0].full, False)
                else:
                    self.sizer.skip()
            self.watch.end_wave()
            return summary

    @staticmethod
    def _sum(summary: WaveSummary, done: list[OpenWave]) -> None:
        for w in done:
            summary.spout_emitted += w.emitted
            summary.executed += sum(r.executed for r in w.reports)
            summary.acked += sum(r.acked for r in w.reports)
            summary.failed += sum(r.failed for r in w.reports)

    def _start_wave(self, again: Logged | None = None) -> Marker:
        """Send wave n's marker (`again`: a logged wave run again, its spouts' kept batches)."""
        self.wave += 1
        n = self.wave
        now = self.clock.now()
        if again is None:
            inputs = self.ticks.take_due(now, n)
            running = [(w.marker.wave, w.emitted) for w in self.open_waves.values()]
            early = self.tracking and self.checkpoints.held_up(self.pending_count, running, self.max_pending,
                                                               len(self.executor_spouts) + len(self.runners))
            inputs.extend(self.checkpoints.take_due(now, n, early))
            rotate = self.rotations_due()
            budget = self._budget()
            budgets = {t: budget for t in self.executor_spouts} if self.active else {}
            weights = None if self.balance is None else self.balance.task_weights(self.placement.bolts)
        else:
            inputs, rotate, budget, budgets, weights = again.inputs, again.rotate, 0, {}, again.weights
        source, roots = (None, None) if again is None else (again.wave, again.roots)
        snapshot = self._snapshot_due(n)
        gated = frozenset(t for t in self.executor_spouts if not self.restorable.get(t, False))
        marker = Marker(n, self.wave_time() if self.clock.simulated else None,
                        now if self.clock.simulated else None, budgets, inputs,
                        self.in_flight.verdicts_needed(n, self.completed_through), rotate,
                        snapshot, self.confirmed, dict(self.trim), gated,
                        rerun=source, roots=roots, keep=frozenset(e.wave for e in self.log), weights=weights)
        for s in self.participants:
            self.pool.slots[s].send(("marker", self.uid, self.epoch, marker))
        ow = OpenWave(marker)
        self.open_waves[n] = ow
        if again is None:
            self.log.append(Logged(n, inputs, rotate, weights=weights))
        else:
            again.wave = n
        if self.runners:
            self._driver_level0(ow, budget, source, roots)
        return marker

    def _budget(self) -> int:
        if self.sizer is None:
            budget = self.wave_tuples
        else:
            total, _ = self.sizer.wave_budget()
            spouts = max(1, len(self.executor_spouts) + sum(1 for st in self.spouts if st.active))
            budget = -(-total // spouts)
        return self.in_flight.budget(budget)

    def _drain(self) -> None:
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return
            self._handle(*item)

    def _check(self) -> None:
        if self._crash is not None:
            raise TopologyStopped(f"topology {self.name!r} stopped: {self._crash}")
        if self._dead and not self.closed:
            raise SlotFailed(sorted(self._dead))

    def _wait(self, keep: int) -> list[OpenWave]:
        """Take reports until at most `keep` waves are open; the waves completed meanwhile."""
        done: list[OpenWave] = []
        while True:
            while self.open_waves:
                first = next(iter(self.open_waves.values()))
                if len(first.reports) < len(self.participants):
                    break
                self.open_waves.popitem(last=False)
                self._completed(first)
                done.append(first)
            if len(self.open_waves) <= keep:
                return done
            self._check()
            if self._dead and self.closed:
                return done  # closing: what a dead slot owed will not come
            self._handle(*self.inbox.get())

    def _report(self, rep: Report) -> None:
        ow = self.open_waves.get(rep.wave)
        if ow is None:
            return
        ow.reports.append(rep)
        ow.emitted += rep.emitted
        ow.full = ow.full or rep.full
        ow.capped = ow.capped or rep.capped
        for comp, tid, f in rep.spouts:
            self.absorb_spout(tid, comp, f)
        stats: dict[str, TaskStats] = {}
        tasks: list[tuple[int, Counters]] = []
        for comp, tid, c in rep.tasks:
            stats.setdefault(comp, TaskStats(comp)).add(c)
            tasks.append((tid, c))
        self.absorb_tasks(stats, tasks, rep.metrics, rep.errors, {})
        if rep.captured:
            merge_captured(self._captured_since.setdefault(rep.wave, {}), rep.captured)
        if rep.errors_dropped:
            self.error_count += rep.errors_dropped
        self.pending_by_task.update(rep.pending)
        if rep.acker_pending is not None:
            self.acker_pending = rep.acker_pending
            self.held = rep.held
        self.busy_secs[rep.slot] = self.busy_secs.get(rep.slot, 0.0) + rep.busy_secs
        self._peer_bytes[rep.slot] = rep.peer_bytes
        self._work_since += rep.busy_secs
        if rep.lost is not None:
            self._crash = f"wave {rep.wave} did not run whole in slot {rep.slot}: {rep.lost}"

    def _completed(self, ow: OpenWave) -> None:
        m = ow.marker
        for e in self.log:
            if e.wave == m.wave:
                e.done = True
        self.completed_through = m.wave
        self.waves_done += 1
        self._last_full = ow.full or ow.capped
        if m.snapshot:
            self._confirm(ow)
        if self.balance is not None:
            self.balance.wave_ended(ow.reports, self.placement.bolts)

    # -- time -----------------------------------------------------------------------------

    def fire_due(self) -> int:
        """Timeouts due on the clock go out with the next wave's marker (its `rotate`)."""
        return 0

