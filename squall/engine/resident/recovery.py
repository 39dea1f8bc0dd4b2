"""How the Spark engine's driver recovers (docs/design.md): slots write snapshots of their tasks
every few waves; when a slot dies every task goes back to the last snapshot all of them wrote, the
dead slot's tasks move to live slots, and the waves logged since run again from the batches their
spout tasks kept. A wave that kills slots each time it runs is lost: its tuples fail (or, when
some were lost before, it is split in halves to isolate the poison), as squall.engine.driver.lost_waves
does on the local engine."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from squall.api.config import Config
from squall.engine.driver.wave import Captured, merge_captured
from squall.engine.resident.messages import DRIVER, Rollback
from squall.engine.resident.placement import SlotFailed, TopologyStopped
from squall.engine.resident.snapshots import SnapshotStore
from squall.engine.tasks.spout_runner import Pulled, take_kept
from squall.observe.dead_letter import make_sink
from squall.observe.errors import ErrorRecord

if TYPE_CHECKING:
    from squall.engine.resident.driver import OpenWave

log = logging.getLogger("squall")

SNAPSHOT_WORK = 20  # task work between snapshots, in times what one costs
STUCK_ROLLBACKS = 2  # rollbacks in a row to one snapshot, in times a lost tuple's attempts: a crash loop


@dataclass
class Logged:
    """A wave run since the confirmed snapshot, as the driver would run it again after a rollback."""

    wave: int  # the number it ran under last: its spout tasks keep its batches under it
    inputs: list  # its ticks and $checkpoint tuples
    rotate: int
    roots: np.ndarray | None = None  # only these roots of it (a part of a lost wave)
    weights: dict[int, float] | None = None  # its shuffles' weights (balance.py): a re-run routes the same
    attempts: int = 0  # slots that died while it ran
    done: bool = False  # it ran whole since the last rollback


class WaveRecovery:
    """The driver's snapshots, rollbacks and re-runs (a part of ClusterDriver)."""

    def _init_recovery(self, pool: Any) -> None:
        self.max_attempts = pool.max_attempts
        self.max_replays = int(self.conf[Config.SQUALL_MAX_REPLAYS])
        self.sink = make_sink(self.conf)
        self.snapshot_waves = max(1, int(self.conf.get(Config.SQUALL_SNAPSHOT_WAVES) or 25))
        self.log: list[Logged] = []  # the waves since the confirmed snapshot
        self.confirmed = 0  # the newest snapshot every slot wrote
        self.sources: dict[int, dict[tuple[str, int], str]] = {}  # confirmed snapshot -> task -> its file
        self.trim: dict[int, int] = {}  # spout task -> the verdicts its confirmed snapshot had
        self.restorable: dict[int, bool] = {}  # executor spout task -> whether its instance pickles
        self.kept: dict[int, dict[int, Pulled]] = {}  # the driver-bound spouts' kept waves
        self._captured_since: dict[int, Captured] = {}  # captured emits (tests) of the waves since the snapshot
        self._snapshot_at = 0  # the last wave that took a snapshot
        self._work_since = 0.0  # seconds of task work since that wave
        self._snap_secs = 0.0  # what the last snapshot took, in all
        self.store: SnapshotStore | None = None
        self.rollbacks = 0
        self.rerun_waves = 0
        self.lost_waves = 0
        self.dead_lettered = 0

        self._stuck = 0  # rollbacks in a row with no newer snapshot between them
        self._stuck_at = -1

    def _snapshot_due(self, n: int) -> bool:
        """A snapshot at the first wave, then when the work since the last outweighs SNAPSHOT_WORK
        times what one costs, at least every `squall.snapshot.waves` waves, and at once
        while acks are held for one (docs/design.md)."""
        due = (self._snapshot_at == 0 or n - self._snapshot_at >= self.snapshot_waves
               or self._work_since >= SNAPSHOT_WORK * self._snap_secs
               or self.held > 0 and self._snapshot_at <= self.confirmed)
        if due:
            self._snapshot_at, self._work_since = n, 0.0
        return due

    def _confirm(self, ow: OpenWave) -> None:
        """Every slot wrote its snapshot of this wave: it is what a rollback goes back to."""
        n = ow.marker.wave
        infos = {r.slot: r.snapshot for r in ow.reports}
        if any(info is None for info in infos.values()):
            return
        sources: dict[tuple[str, int], str] = {}
        for slot, info in infos.items():
            for key in self.placement.tasks_of(slot):
                if key[0] != "spout" or info.spouts.get(key[1]) is not None:
                    sources[key] = info.path
            for tid, applied in info.spouts.items():
                self.restorable[tid] = applied is not None
                if applied is not None:
                    self.trim[tid] = applied
        self._snap_secs = sum(info.secs for info in infos.values())
        previous, self.confirmed = self.confirmed, n
        self.sources = {w: src for w, src in self.sources.items() if w == previous}
        self.sources[n] = sources
        # A logged wave the snapshot holds is done with; one still to run again (after a rollback,
        # under the older number its batches are kept by) is not.
        self.log = [e for e in self.log if not (e.done and e.wave <= n)]
        keep = {e.wave for e in self.log}
        for w in [w for w in self._captured_since if w <= n]:
            merge_captured(self._captured, self._captured_since.pop(w))
        for w in [w for w in self.kept if w <= n and w not in keep]:
            del self.kept[w]
        if previous and self.store is not None:
            self.store.drop_before(previous)

    def _recover(self) -> list[OpenWave]:
        """Slots died: every task back to the confirmed snapshot, the dead slots' tasks placed on
        live ones, and the logged waves run again (a wave that keeps killing slots is lost); the
        waves completed meanwhile."""
        done: list[OpenWave] = []
        while True:
            dead, self._dead = set(self._dead), set()
            # With two waves in flight the death cannot be told to one of them: neither counts an
            # attempt, and their re-runs, one at a time, name the one that kills.
            if len(self.open_waves) == 1:
                running = next(iter(self.open_waves.values()))
                for e in self.log:
                    if e.wave == running.marker.wave:
                        e.attempts += 1
            self.open_waves.clear()
            try:
                self._rollback(dead)
                done.extend(self._rerun())
                return done
            except SlotFailed:
                continue

    def _rollback(self, dead: set[int]) -> None:
        self.epoch += 1
        self.rollbacks += 1
        self._stuck = self._stuck + 1 if self.confirmed == self._stuck_at else 1
        self._stuck_at = self.confirmed
        if self._stuck > STUCK_ROLLBACKS * self.max_attempts * (self.max_replays + 1):
            raise TopologyStopped(
                f"topology {self.name!r}: {self._stuck - 1} rollbacks in a row to snapshot {self.confirmed}, and "
                f"slots kept dying ({self._last_death}). A tuple that kills the slot holding its own spout task "
                "is emitted again by the restored spout, with nothing left to isolate it by: give the spout "
                "DRIVER_BOUND = True, or more slots (squall.spark.slots), so that it runs apart from the bolt that "
                "dies; see the error records for the failures before")
        # The dead slots' tasks go elsewhere even if a slot is back already (a new process to load):
        # a spout task then runs apart from what killed it, so its kept batches outlive a next death.
        live = [s for s in self._live_slots() if s not in dead] or self._live_slots()
        old = self.placement
        gone = {s for s in self._participants_of(old) if s not in live}
        self.placement = old.moved(gone, live)
        moved = {t: (self.trim.get(t) if self.restorable.get(t) else None)
                 for t, s in old.spouts.items() if s in dead or s in gone}
        if self.confirmed == 0:
            moved = dict.fromkeys(moved)
        slots = self._participants_of(self.placement)
        blob = self._setup_blob()
        log.warning("%s: slot(s) %s lost; rolling back to snapshot %d and running %d wave(s) again on slots %s",
                    self.name, sorted(dead), self.confirmed, len(self.log), slots)
        self._load(blob, slots, recovering=True)
        plan = Rollback(self.confirmed, blob, self.sources.get(self.confirmed, {}), moved, self.wave, self.active)
        self._captured_since.clear()
        for e in self.log:  # every task is back before them: each runs again
            e.done = False
        for s in slots:
            self.pool.slots[s].send(("rollback", self.uid, self.epoch, plan))
        self.completed_through = self.verdicts_through = self.wave
        self.verdicts_heard.clear()
        self._check()

    def _live_slots(self) -> list[int]:
        """The slots whose process is up (one that died and came back counts: it loads the topology
        again); when none is, wait for Spark to start one again."""
        live = [s.index for s in self.pool.slots if s.alive]
        if live:
            return live
        deadline = time.monotonic() + self.pool.start_secs
        for s in self.pool.slots:
            if s.wait_attached(0, max(0.0, deadline - time.monotonic())):
                return [x.index for x in self.pool.slots if x.alive]
        raise TopologyStopped(f"topology {self.name!r}: every slot died and none came back within "
                              f"{self.pool.start_secs:.0f} s")

    def _rerun(self) -> list[OpenWave]:
        """Run the logged waves again, in order, one at a time (a snapshot may let some go meanwhile)."""
        done: list[OpenWave] = []
        while (e := next((x for x in self.log if not x.done), None)) is not None:
            if e.attempts:
                roots, suspects = self._kept_roots(e)
                if e.attempts >= self.max_attempts or suspects:  # one lost before is likely its poison
                    self._lost(e, roots, suspects)
                    continue
            self.rerun_waves += 1
            self._start_wave(e)
            done.extend(self._wait(0))
        return done

    def _kept_roots(self, e: Logged) -> tuple[np.ndarray, bool]:
        """The roots of logged wave `e` (of its part), and whether any was in a lost wave before:
        asked of the spout tasks that keep its batches (only when it killed a slot)."""
        holders = sorted({s for s in self.spout_slots if s != DRIVER})
        try:
            parts = self._ask(holders, lambda rid: ("kept_roots", self.uid, rid, e.wave)) if holders else []
        except TimeoutError:  # a slot that failed or died does not answer: say that, not the timeout
            self._drain()
            self._check()
            raise
        found = [pair for part in parts for pair in part.values()]
        found += [(got.roots, self.runners[tid].suspects(got.msg_ids))
                  for tid, got in self.kept.get(e.wave, {}).items()]
        roots, suspects = [], False
        for r, lost_before in found:
            mine = np.isin(r, e.roots) if e.roots is not None else np.ones(len(r), bool)
            roots.append(r[mine])
            suspects = suspects or bool(lost_before[mine].any())
        return (np.concatenate(roots) if roots else np.zeros(0, np.uint64)), suspects

    def _lost(self, e: Logged, every: np.ndarray, suspects: bool) -> None:
        """Logged wave `e` killed slots every time it ran (once, when it holds a tuple lost before):
        its tuples fail, or it is split in halves when some were lost before (squall.engine.driver.lost_waves:
        the same policy)."""
        i = self.log.index(e)
        self.lost_waves += 1
        process, note = self.pool.slots[0].describe()
        # Spark's own words for it, so both can be looked up
        error = f"{process} exited unexpectedly ({self._last_death}) running this wave, {e.attempts} time(s){note}"
        holders = sorted({s for s in self.spout_slots if s != DRIVER})
        log.warning("%s: wave lost (%d roots): %s", self.name, len(every), error)
        self.record([ErrorRecord.from_exception("__wave", -1, f"WaveLost: {error}", kind="lost")])
        if len(every) > 1 and suspects:
            mid = len(every) // 2
            self.log[i:i + 1] = [Logged(e.wave, e.inputs, e.rotate, every[:mid], weights=e.weights),
                                 Logged(e.wave, e.inputs, e.rotate, every[mid:], weights=e.weights)]
            return
        for s in holders:
            self.pool.slots[s].send(("fail_lost", self.uid, self.epoch, e.wave, e.roots, error, self.max_replays))
        for tid in list(self.kept.get(e.wave, {})):
            got = take_kept(self.kept, e.wave, tid, e.roots)
            for record in self.runners[tid].lose(got, error, self.max_replays, self.name):
                self._handle(DRIVER, ("dead_letters", self.uid, [record]))
        del self.log[i]
