"""One topology's tasks in one slot, and its waves as they go through the slot (docs/design.md).

Per wave n: level 0 runs once the marker is here (the spout tasks pull, or send their kept batches
again in a re-run); level L once every sender's level L-1 message of wave n is here. After each
level the slot sends every slot of the topology its level message (what its tasks sent to that
slot's tasks, possibly nothing). After the last level it sends each acker's slot its part of the
wave's ack messages, folded per root. An acker partition applies wave n once every slot's part is
in, and sends every spout task's slot its verdicts. Tasks take their waves in order: a level of
wave n runs after that level of every earlier wave.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from squall.engine.driver.wave import add_captured
from squall.engine.resident import wire
from squall.engine.resident.messages import DRIVER, AckPart, Marker, Report, Setup
from squall.engine.resident.slot_ackers import AckerWave, SlotAckers
from squall.engine.resident.slot_recovery import SlotRecovery
from squall.engine.resident.slot_spouts import SlotSpouts
from squall.engine.resident.snapshots import SnapshotStore
from squall.engine.tasks.sealing import dumps
from squall.engine.tasks.spout_runner import Pulled, SpoutRunner, take_kept
from squall.engine.tasks.task_host import TaskHost
from squall.observe.errors import ErrorRecord
from squall.reliability.acker import AckerPartition
from squall.reliability.anchoring import combine
from squall.reliability.pending import FailReason
from squall.reliability.settled import Sent, Settled, unsettled

if TYPE_CHECKING:
    from squall.engine.resident.slot import SlotProcess

log = logging.getLogger("squall")


@dataclass
class WaveState:
    """Wave n as this slot sees it."""

    n: int
    marker: Marker | None = None
    level: int = -1  # the last level run here (0: the spout tasks pulled)
    heard: dict[int, set] = field(default_factory=dict)  # level -> senders whose message of it came
    inbox: dict[int, list] = field(default_factory=dict)  # bolt task -> its inputs (pickled batches)
    sent_in: list[Sent] = field(default_factory=list)  # batches sent here with no edge values
    settled: list[Settled] = field(default_factory=list)
    roots: dict[int, list[np.ndarray]] = field(default_factory=dict)  # acker -> ack roots of the wave
    vals: dict[int, list[np.ndarray]] = field(default_factory=dict)
    init: dict[int, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)  # acker -> (roots, vals)
    fails: dict[int, list[tuple[int, FailReason]]] = field(default_factory=dict)
    report: Report | None = None
    spout_snaps: dict[int, tuple[bytes | None, int]] = field(default_factory=dict)  # spout task -> snapshot at level 0
    acker_snaps: dict[int, bytes] = field(default_factory=dict)  # acker partition -> snapshot after its apply
    bolt_snaps: dict[int, tuple] = field(default_factory=dict)  # bolt task -> snapshot after its level ran
    snap_secs: float = 0.0  # what its spouts', bolts' and ackers' snapshots took
    applied: bool = False  # the ackers here applied it
    ended: bool = False  # the slot's own part is done (acks sent)


class SlotTopology(SlotSpouts, SlotAckers, SlotRecovery):
    """A topology's spout tasks, bolt tasks and acker partitions in this slot."""

    def __init__(self, slot: SlotProcess, uid: str, setup_blob: bytes, recovering: bool = False,
                 active: bool = True):
        from pyspark import cloudpickle  # noqa: PLC0415 - components may be lambdas or local classes

        self.slot = slot
        self.uid = uid
        self.dumps, self.loads = cloudpickle.dumps, cloudpickle.loads
        self.setup: Setup = cloudpickle.loads(setup_blob)
        self.epoch = 0
        self.stash: list[tuple] = []  # messages of a newer epoch, held until its rollback comes
        self.active = active  # the topology's state, for spouts made here later (a rollback)
        self.store = SnapshotStore.of(self.setup.conf, uid)
        self.store.check_probe(self.setup.probe)
        self._fixed_written: set[int] = set()
        self._place(self.setup)
        self.runners: dict[int, SpoutRunner] = {}
        self.ackers: dict[int, AckerPartition] = {k: AckerPartition(k, self._nackers) for k in self._ackers_here}
        self.host = TaskHost(self.topology, self.setup.conf, self.setup.capture)
        for tid in self._spouts_here:  # loaded by a recovery: a spout that cannot open yet is tried again
            self.runners[tid] = self._open_spout(tid, self._open_retry_secs() if recovering else 0.0)
        self.waves: dict[int, WaveState] = {}
        self.acker_waves: dict[int, AckerWave] = {}
        self.verdicts_heard: dict[int, int] = {}  # wave -> acker slots whose verdicts of it came
        self.verdicts_through = 0  # every verdict of the waves up to this one applied
        self.applied_through: dict[int, int] = {}  # spout task -> the same, as its snapshot records it
        self.kept: dict[int, dict[int, Pulled]] = {}  # wave -> spout task -> what it sent (for a re-run)
        self.clock: float | None = None  # the simulated clock of the latest marker (None: wall clock)
        self.due = False  # messages came that may let a level run (advance)

    def _place(self, setup: Setup) -> None:
        self.setup = setup
        self.topology = setup.topology
        me = self.slot.index
        topo = self.topology
        self._spouts_here = sorted(t for t, s in setup.spouts.items() if s == me)
        self._bolts_here = sorted(t for t, s in setup.bolts.items() if s == me)
        self._ackers_here = sorted(k for k, s in setup.ackers.items() if s == me)
        self._nackers = len(setup.ackers)
        self.depth = max((topo.levels[topo.task_component[t]] for t in setup.bolts), default=0)
        self.levels: list[list[int]] = [[] for _ in range(self.depth + 1)]
        for t in self._bolts_here:
            self.levels[topo.levels[topo.task_component[t]]].append(t)
        self.participants = setup.participants
        self.level0_senders = len(self.participants) + (1 if setup.driver_spouts else 0)
        self.acker_slots = setup.acker_slots
        self.spout_slots = setup.spout_slots
        self.spout_slot = {**setup.spouts, **dict.fromkeys(setup.driver_spouts, DRIVER)}
        self._weights: dict[int, float] | None = None  # the newest marker's shuffle weights (balance.py)

    # -- messages -----------------------------------------------------------------------------

    def handle(self, kind: str, msg: tuple) -> None:
        if kind in ("marker", "level", "acks", "verdicts", "resend", "rollback"):
            epoch = msg[2]
            if epoch < self.epoch:
                return  # sent before a rollback: what it was for is gone
            if epoch > self.epoch and kind != "rollback":
                self.stash.append(msg)  # a peer that rolled back first: its wave waits for our rollback
                return
        if kind == "marker":
            self._marker(msg[3])
        elif kind == "level":
            _, _, _, n, level, sender, items, sent = msg
            ws = self._wave(n)
            for tid, blobs in items.items():
                ws.inbox.setdefault(tid, []).extend(blobs)
            ws.sent_in.extend(sent)
            ws.heard.setdefault(level, set()).add(sender)
        elif kind == "acks":
            _, _, _, n, sender, parts = msg
            self.acker_waves.setdefault(n, AckerWave()).parts[sender] = parts
        elif kind == "verdicts":
            _, _, _, n, _sender, parts = msg
            self._apply_verdicts(parts, getattr(self.waves.get(n), "report", None))
            self.verdicts_heard[n] = self.verdicts_heard.get(n, 0) + 1
            while self.verdicts_heard.get(self.verdicts_through + 1, 0) >= len(self.acker_slots):
                self.verdicts_through += 1
                del self.verdicts_heard[self.verdicts_through]
        elif kind == "resend":
            self._apply_verdicts(msg[4])
        elif kind == "active":
            self._set_active(msg[2])
            return
        elif kind == "copy":
            self._copy(msg[2], msg[3])
            return
        elif kind == "kept_roots":
            self._kept_roots(msg[2], msg[3])
            return
        elif kind == "fail_lost":
            self._fail_lost(*msg[3:])
        elif kind == "rollback":
            self._rollback(msg[2], msg[3])
        self.due = True

    def advance(self) -> bool:
        """Run what the messages taken in since the last call let run (SlotProcess.serve); if any."""
        if not self.due:
            return False
        self.due = False
        self._advance()
        return True

    def _wave(self, n: int) -> WaveState:
        return self.waves.get(n) or self.waves.setdefault(n, WaveState(n))

    def _marker(self, marker: Marker) -> None:
        self.clock = marker.clock
        ws = self._wave(marker.wave)
        ws.marker = marker
        ws.report = Report(marker.wave, self.slot.index)
        if self.ackers:
            self.acker_waves.setdefault(marker.wave, AckerWave()).marker = marker
        if marker.confirmed:
            self._trim_kept(marker.confirmed, marker.keep)
        if marker.weights == self._weights:  # the same object as the wave before's: a task's check is `is`
            marker.weights = self._weights
        self._weights = marker.weights

    def _now(self) -> float:
        return self.clock if self.clock is not None else time.time()

    # -- the waves ----------------------------------------------------------------------------

    def _advance(self) -> None:
        """The ackers' applies (short, and the spouts' next pulls wait for their verdicts), then the
        next level that can run, oldest wave first: one level a call, so that what came meanwhile
        (another slot's level, an acker's part, this slot's own messages) is taken in before the
        next (SlotProcess.serve)."""
        if self.ackers:
            self._apply_ackers()
        for n in sorted(self.waves):
            if not self._report(self.waves[n]):
                break  # reports go in wave order, as soon as they can: the driver starts a wave on them
        lowest = -2  # the lowest level of an earlier wave still open: later waves wait below it
        for n in sorted(self.waves):
            ws = self.waves[n]
            if self._step(ws, lowest):
                self.due = True
                break
            lowest = ws.level if lowest == -2 else min(lowest, ws.level)

    def _step(self, ws: WaveState, lowest: int) -> bool:
        """Run wave `ws`'s next level here if it can: its inputs are in, and every earlier wave ran it."""
        nxt = ws.level + 1
        if ws.ended or (lowest != -2 and lowest < nxt):
            return False
        if nxt == 0:
            m = ws.marker
            if m is None or self.runners and self.acker_slots and self.verdicts_through < m.verdicts_through:
                return False  # its spout tasks' verdicts of the waves before first
            self._level0(ws)
            return True
        if nxt <= self.depth:
            need = self.level0_senders if nxt == 1 else len(self.participants)
            if len(ws.heard.get(nxt - 1, ())) < need:
                return False
            self._level(ws, nxt)
            return True
        self._end(ws)
        return True

    def _level0(self, ws: WaveState) -> None:
        m = ws.marker
        ws.level = 0
        for target, batch in m.inputs:  # ticks and $checkpoint tuples for tasks here
            if self.setup.bolts.get(target) == self.slot.index:
                ws.inbox.setdefault(target, []).append(batch)
        out: dict[int, dict[int, list]] = {}
        sent: dict[int, list[Sent]] = {}
        rep = ws.report
        t0 = time.perf_counter()
        for tid, runner in self.runners.items():
            if m.rerun is not None:
                got = take_kept(self.kept, m.rerun, tid, m.roots)
                if got is None:
                    continue
            else:
                budget = m.budgets.get(tid, 0)
                if budget <= 0:
                    continue
                runner.task.weigh(m.weights)  # load-aware shuffle: this wave's weights (balance.py)
                got = runner.pull(budget, self._now())
                if runner.figures.captured:  # the wave's own emits, in its report (a rollback drops them)
                    add_captured(rep.captured, runner.component, tid, runner.figures.captured)
                    runner.figures.captured = None
                rep.emitted += got.emitted
                rep.full = rep.full or got.full
                rep.capped = rep.capped or got.capped
            if self._nackers and len(got.roots):
                self.kept.setdefault(ws.n, {})[tid] = got
                self._init(ws, got.roots, got.init_vals)
            self._route(got.outputs, out, sent, to_bytes=True)
            if m.snapshot:
                t1 = time.perf_counter()
                ws.spout_snaps[tid] = (self._spout_snapshot(runner), self.verdicts_through)
                ws.snap_secs += time.perf_counter() - t1
        rep.busy_secs += time.perf_counter() - t0
        if self.depth >= 1:
            self._send_level(ws.n, 0, out, sent)

    def _level(self, ws: WaveState, level: int) -> None:
        ws.level = level
        m = ws.marker
        rep = ws.report
        out: dict[int, dict[int, list]] = {}
        sent: dict[int, list[Sent]] = {}
        t0 = time.perf_counter()
        for tid in self.levels[level]:
            inputs = ws.inbox.pop(tid, None)
            if not inputs:
                continue
            self.host.task(tid).weigh(m.weights)  # as the wave first ran, when it runs again (balance.py)
            step = self.host.step(tid, inputs, ws.n, m.now, to_bytes=True)
            res = step.result
            self._route(step.outputs, out, sent, to_bytes=False)
            for s in res.sent:  # batches to tasks that settle whole, checked where they arrive
                sent.setdefault(self.setup.bolts[s.target], []).append(s)
            if step.ack_roots is not None:
                self._acks(ws, step.ack_roots, step.ack_vals)
            for r, why in zip(res.fail_roots, res.fail_reasons):
                ws.fails.setdefault(r % self._nackers if self._nackers else 0, []).append((r, why))
            ws.settled.extend(res.settled)
            rep.tasks.append((res.component, res.task, step.counters))
            rep.executed += step.counters.executed
            self._errors(rep, res.errors)
            if res.metrics:
                rep.metrics.append((res.component, res.task, res.metrics))
            if res.captured:
                add_captured(rep.captured, res.component, res.task, res.captured)
        rep.busy_secs += time.perf_counter() - t0
        if m.snapshot:  # now: with waves in flight, a task may take its step of the next wave before this one ends
            t1 = time.perf_counter()
            for tid in self.levels[level]:
                ws.bolt_snaps[tid] = self.host.task(tid).snapshot(self.dumps, ws.n)
            ws.snap_secs += time.perf_counter() - t1
        if level < self.depth:
            self._send_level(ws.n, level, out, sent)

    def _route(self, outputs: Iterable[tuple[int, Any]], out: dict[int, dict[int, list]],
               sent: dict[int, list[Sent]], to_bytes: bool) -> None:
        """Outputs (target task, batch or its bytes) into per-slot messages."""
        where = self.setup.bolts
        for target, b in outputs:
            slot = where[target]
            if to_bytes:
                settle = getattr(b, "anc_settle", None)
                if settle is not None:
                    sent.setdefault(slot, []).append(Sent(settle, len(b), b.component, b.source_task, target))
                b = dumps(b)
            out.setdefault(slot, {}).setdefault(target, []).append(b)

    def _send_level(self, n: int, level: int, out: dict[int, dict[int, list]], sent: dict[int, list[Sent]]) -> None:
        me = self.slot.index
        for slot in self.participants:
            items = out.get(slot, {})
            if slot != me:
                items = {t: [wire.blob(b) for b in bs] for t, bs in items.items()}
            self.slot.send(slot, ("level", self.uid, self.epoch, n, level, me, items, sent.get(slot, [])))

    def _errors(self, rep: Report, errors: list[ErrorRecord]) -> None:
        room = self.setup.max_errors - len(rep.errors)
        rep.errors.extend(errors[:max(0, room)])
        rep.errors_dropped += max(0, len(errors) - max(0, room))

    def _end(self, ws: WaveState) -> None:
        """The slot's part of the wave is done: its ack parts go to the ackers' slots."""
        ws.ended = True
        ws.level = self.depth + 1
        astray = unsettled(ws.sent_in, ws.settled)
        if astray is not None:
            ws.report.lost = astray
        if self._nackers:
            parts_by_slot: dict[int, dict[int, AckPart]] = {s: {} for s in self.acker_slots}
            for k, slot in self.setup.ackers.items():
                part = AckPart()
                if k in ws.init:
                    part.init_roots = np.concatenate([r for r, _ in ws.init[k]])
                    part.init_vals = np.concatenate([v for _, v in ws.init[k]])
                if k in ws.roots:
                    part.roots, part.vals = combine(np.concatenate(ws.roots[k]), np.concatenate(ws.vals[k]))
                for r, why in ws.fails.get(k, ()):
                    part.fail_roots.append(r)
                    part.fail_reasons.append(why)
                if astray is None:  # a lost wave's acks count for nothing; its roots fail at the driver
                    parts_by_slot[slot][k] = part
            for slot, parts in parts_by_slot.items():
                self.slot.send(slot, ("acks", self.uid, self.epoch, ws.n, self.slot.index, parts))
        ws.init, ws.roots, ws.vals, ws.fails = {}, {}, {}, {}

    def _report(self, ws: WaveState) -> bool:
        """Send the driver this slot's report of the wave once it is whole here: its levels ran,
        its ackers applied it, and its spout tasks applied its verdicts (so the report counts them)."""
        if not ws.ended or self._ackers_here and not ws.applied:
            return False
        if self.runners and self.acker_slots and self.verdicts_through < ws.n:
            return False
        del self.waves[ws.n]
        rep = ws.report
        for tid, runner in self.runners.items():
            f = runner.take_figures()
            rep.pending[tid] = len(runner.pending)
            if not f.empty:
                rep.spouts.append((runner.component, tid, f))
        if self.ackers:
            rep.acker_pending = sum(len(a) for a in self.ackers.values())
            rep.held = sum(a.held_count for a in self.ackers.values())
        if ws.marker.snapshot:
            rep.snapshot = self._snapshot(ws)
        rep.peer_bytes = self.slot.peers.meter.bytes
        self.slot.send(DRIVER, ("report", self.uid, self.epoch, rep))
        return True

    def drop(self) -> None:
        for runner in self.runners.values():
            try:
                runner.spout.close()
            except Exception:  # noqa: BLE001 - a spout's close must not keep the slot from going on
                log.exception("squall slot: close of spout %s[%d] raised", runner.component, runner.task_id)
        for task, e in self.host.cleanup():
            log.error("squall slot: cleanup of %s[%d] raised: %s", task.component, task.task_id, e)
