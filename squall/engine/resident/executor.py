"""The driver's side of a topology whose bolt tasks are resident in a pool's slots.

Every bolt task lives in one slot (task i of a component in slot i mod slots) for the whole run.
A wave goes through the topology level by level: the driver sends each slot the level's inputs
for its tasks, and routes what they send on to the slots of the next level's tasks, as the very
bytes they sent. Several waves go through at once (`squall.waves.in.flight`): a wave sends a
level once the wave before it has sent it, so each task takes its waves in order, while the
coordinator builds the next. There is no job to start per wave, so a wave's fixed cost is a few messages.

Recovery (squall.engine.resident.task_log): every task's answered steps are logged with their
inputs since its last confirmed snapshot, taken every `squall.resident.snapshot.waves` waves (or
sooner once the logs hold `squall.resident.snapshot.bytes`). A slot that dies is started again by
its host and its tasks rebuilt from their logs before its waiting requests run again (Spark's task
retry, squall.engine.resident.link); a request that keeps killing its slot loses its wave. A lost
wave, and the waves after it that built on its state, leave no trace: their steps are taken out of
the logs and every task that had taken one is rebuilt as of the last good wave before any other
wave runs, so nothing is applied twice and only the lost wave's roots fail.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all

import numpy as np

from squall.api.config import Config
from squall.api.topology import StormTopology
from squall.engine.fixed_parts import FixedPart
from squall.engine.resident import wire
from squall.engine.resident.link import Slot, SlotError, SlotLost
from squall.engine.resident.pool import SlotPool
from squall.engine.resident.task_log import TaskLog
from squall.engine.sealing import dumps
from squall.engine.wave import WaveLost, WaveOutput
from squall.reliability.batch import TupleBatch
from squall.reliability.settled import sent_of

SNAPSHOT_WORK = 20  # work between snapshots, in times what one costs


class ResidentExecutor:
    default_wave_tuples = 2000
    # Under a heavy load a wave lasts at least this long (squall.engine.wave_sizing): the sizer's
    # a + b n fit sees a resident wave's fixed cost as ~3 ms, but a small wave pays more (each
    # task's per-batch work, the driver's turn on cores the slots share): word count ran 0.94M
    # bolt-tuples/s at 3,000-sentence waves, 1.13M at 10,000 and 1.34M at 25,000, where a fixed cost
    # of a tenth put waves at ~3,000. 0.15 s settled the acked case at ~14,500 sentences (0.85-0.91M),
    # 0.3 s at max pending's 25,000 (1.02-1.09M); under a full load max pending bounds latency anyway.
    min_wave_secs = 0.3

    def __init__(self, topology: StormTopology, conf: dict, pool: SlotPool, capture: bool = False,
                 ui_url: str | None = None, engine: str = "resident"):
        from pyspark import cloudpickle  # noqa: PLC0415 - bolts may be lambdas or local classes

        self.uid = uuid.uuid4().hex
        self.engine = engine  # the engine it runs for (the UI says it)
        self.topology = topology
        self.pool = pool
        self.ui_url = ui_url
        self._setup = cloudpickle.dumps((topology.without_spout_instances(), dict(conf), capture))
        depth = max((topology.levels[c] for c in topology.bolts_in_order), default=0)
        self.levels = [[t for c in topology.bolts_in_order if topology.levels[c] == lv for t in topology.task_ids[c]]
                       for lv in range(1, depth + 1)]
        self.slot_of = {t: i % pool.count for c in topology.bolts_in_order for i, t in enumerate(topology.task_ids[c])}
        self.logs = {t: TaskLog() for level in self.levels for t in level}
        self.snapshot_waves = max(1, int(conf.get(Config.SQUALL_RESIDENT_SNAPSHOT_WAVES) or 25))
        self.snapshot_bytes = int(conf.get(Config.SQUALL_RESIDENT_SNAPSHOT_BYTES) or 256 << 20)
        self.lock = threading.Lock()  # the logs, and which slot processes this topology is loaded in
        self._loaded: dict[int, int] = {}  # slot index -> the process (incarnation) loaded with this topology
        self.slots: list[Slot] = []
        self._epoch = 0  # moves on at each lost wave: a wave of an older epoch stops where it is
        self._rollback_due = False
        self._good = 0  # the last wave settled good
        self._submitted = 0  # waves submitted so far
        self._snapshot_at: int | None = None  # of those, the last that took a snapshot (None: none yet)
        self._confirmed_at: int | None = None  # and the last whose snapshot was confirmed
        self._gates: Gates | None = None  # the last wave submitted's
        self._runner: ThreadPoolExecutor | None = None
        self.waves = 0  # waves that ran whole
        self.rollbacks = 0
        self.rebuilt_tasks = 0  # tasks rebuilt from their logs (a slot back, or a rollback)
        self.replayed_steps = 0  # steps they ran again to get there
        self.busy_secs: dict[int, float] = {}  # slot -> seconds its tasks' steps took (profiling)
        self._work_since = 0.0  # seconds of steps since the last snapshot wave started
        self._snap_secs: dict[int, float] = {}  # task -> seconds its last snapshot took

    @property
    def depth(self) -> int:
        return len(self.levels)

    def start(self) -> None:
        if self.levels:
            self.slots = self.pool.join(self)

    def stop(self) -> None:
        if self._runner is not None:
            self._runner.shutdown(wait=True)
        if self.slots:
            self.pool.leave(self)
            self.slots = []

    # -- waves --------------------------------------------------------------------------------

    def run_wave(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int, now: float | None = None) -> WaveOutput:
        return self.submit_wave(spout_outputs, wave, now).result()

    def submit_wave(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int,
                    now: float | None = None) -> SubmittedWave:
        """Start the wave: its levels go to the slots once the wave before has sent them."""
        if not self.levels:
            return SubmittedWave(self, wave, None, False)
        if self._rollback_due:
            self._rollback()
        self._submitted += 1
        snapshot = self._snapshot_due()
        if snapshot:
            self._snapshot_at, self._work_since = self._submitted, 0.0
        before, self._gates = self._gates, Gates(len(self.levels))
        if self._runner is None:
            self._runner = ThreadPoolExecutor(max_workers=4, thread_name_prefix="squall-resident")
        job = self._runner.submit(self._run, spout_outputs, wave, now, self._epoch, before, self._gates, snapshot)
        return SubmittedWave(self, wave, job, snapshot, self._submitted)

    def _snapshot_due(self) -> bool:
        """A snapshot every wave its tasks' work since the last outweighs SNAPSHOT_WORK times what
        taking one costs (so a rebuild runs little again, and snapshots cost a few percent), and
        at least every `snapshot_waves` waves, or once the logs hold `snapshot_bytes`."""
        if self._snapshot_at is None or self._submitted - self._snapshot_at >= self.snapshot_waves:
            return True
        if self._work_since >= SNAPSHOT_WORK * sum(self._snap_secs.values()):
            return True
        with self.lock:
            return sum(lg.held_bytes for lg in self.logs.values()) >= self.snapshot_bytes

    def _run(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int, now: float | None, epoch: int,
             before: Gates | None, gates: Gates, snapshot: bool) -> WaveOutput:
        """In a runner thread: the wave, level by level (raises WaveLost)."""
        inbox: dict[int, list[bytes]] = {}
        for target, batch in spout_outputs:
            inbox.setdefault(target, []).append(dumps(batch))
        out = WaveOutput()
        out.sent.extend(sent_of(spout_outputs))  # matched with the tasks' Settled (reliability/settled.py)
        roots: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        asked: list[Future] = []
        try:
            for level, tids in enumerate(self.levels):
                if before is not None:
                    before.sent[level].wait()
                if self._epoch != epoch or before is not None and before.failed:
                    raise WaveLost("dropped: a wave before it was lost")
                futures = self._send_level(tids, inbox, wave, now, snapshot)
                gates.sent[level].set()
                asked.extend(futures)
                for f in futures:
                    self._take(f.result(), inbox, out, roots, vals)
            return out.finish(roots, vals)
        except (SlotLost, SlotError) as e:
            gates.failed = True  # before the gates open: no later wave runs a level after this one failed
            raise WaveLost(str(e)) from e
        except WaveLost:
            gates.failed = True
            raise
        finally:
            for sent in gates.sent:  # a wave that stopped part way holds no later one back
                sent.set()
            wait_all(asked)  # every step it asked for answered or failed before it counts as ended

    def _send_level(self, tids: list[int], inbox: dict[int, list[bytes]], wave: int, now: float | None,
                    snapshot: bool) -> list[Future]:
        per_slot: dict[int, list[tuple[int, list[bytes]]]] = {}
        for tid in tids:
            blobs = inbox.pop(tid, None)
            if blobs or snapshot:  # a snapshot wave asks every task, with inputs or not
                per_slot.setdefault(self.slot_of[tid], []).append((tid, blobs or []))
        futures = []
        for s, items in per_slot.items():
            wrapped = [(tid, [wire.blob(b) for b in blobs]) for tid, blobs in items]
            futures.append(self.slots[s].request("step", self.uid, wave, now, wrapped, snapshot,
                                                 on_answer=self._logger(wave, now, items), group=(self.uid, wave)))
        return futures

    def _logger(self, wave: int, now: float | None, items: list[tuple[int, list[bytes]]]) -> Callable[[list], None]:
        """What logs a step once its slot answered (under the slot's lock, so no resync misses it)."""
        blobs = dict(items)

        def answered(payload: list) -> None:
            with self.lock:
                for tid, *_, snap, _run_secs, _snap_secs in payload:
                    self.logs[tid].answered(wave, now, blobs[tid], snap)
        return answered

    def _take(self, payload: list, inbox: dict[int, list[bytes]], out: WaveOutput, roots: list, vals: list) -> None:
        for tid, sent, r, v, res, counters, snap, secs, snap_secs in payload:
            for target, b in sent:
                inbox.setdefault(target, []).append(b)
            if r is not None:
                roots.append(r)
                vals.append(v)
            if res is not None:
                out.add_result(res, counters)
            s = self.slot_of[tid]
            self.busy_secs[s] = self.busy_secs.get(s, 0.0) + secs + snap_secs
            self._work_since += secs
            if snap is not None:
                self._snap_secs[tid] = snap_secs

    # -- lost waves and slots that come back --------------------------------------------------

    def _settled(self, wave: int, snapshot: bool, seq: int) -> None:
        self._good = wave
        self.waves += 1
        if snapshot:
            with self.lock:
                for lg in self.logs.values():
                    lg.confirm(wave)
            self._confirmed_at = seq

    def _lost(self) -> None:
        """A wave was lost or dropped (the coordinator's thread, once no later wave is running, or
        they are dropped too): later ones stop, and the next to start rolls back first."""
        self._epoch += 1
        self._rollback_due = True

    def _rollback(self) -> None:
        """Every task back to its state after the last good wave (no wave of this topology runs)."""
        self._rollback_due = False
        self._gates = None  # no wave in flight: the next one waits for none
        self._snapshot_at = self._confirmed_at
        self.rollbacks += 1
        per_slot: dict[int, list[tuple]] = {}
        with self.lock:
            for tid, lg in self.logs.items():
                if lg.drop_after(self._good):
                    per_slot.setdefault(self.slot_of[tid], []).append(lg.rebuild(tid))
        self._count_rebuilds([item for items in per_slot.values() for item in items])
        futures = [self.slots[s].request("restore", self.uid, _wrapped(items)) for s, items in per_slot.items()]
        for f in futures:
            try:
                f.result()
            except SlotLost:  # died while restoring: its resync rebuilt it from the same logs
                pass

    def resync(self, slot: Slot) -> list[tuple]:
        """A process attached to `slot` (under its lock): load this topology there and rebuild its tasks."""
        with self.lock:
            if self._loaded.get(slot.index) == slot.incarnation:
                return []
            self._loaded[slot.index] = slot.incarnation
            items = [lg.rebuild(tid) for tid, lg in self.logs.items()
                     if self.slot_of[tid] == slot.index and (lg.base is not None or lg.steps)]
        messages = [("load", self.uid, wire.blob(self._setup))]
        if items:
            self._count_rebuilds(items)
            messages.append(("restore", self.uid, _wrapped(items)))
        return messages

    def _count_rebuilds(self, items: list[tuple]) -> None:
        self.rebuilt_tasks += len(items)
        self.replayed_steps += sum(len(steps) for _, _, steps in items)


class Gates:
    """A wave's progress as the wave after it waits on it: each level sent, and whether it failed.
    The next wave sends a level once this one has sent it, so a slot gets each of its tasks' waves
    in order; it sends no further level once this one failed (it is dropped, and runs again after a
    rollback), and its steps queued behind the one that failed in a slot fail with it (link.Slot):
    as with a Spark job a wave, a task takes a step of a dropped wave only where its step of the
    failed wave was done."""

    def __init__(self, levels: int):
        self.sent = [threading.Event() for _ in range(levels)]
        self.failed = False


def _wrapped(items: list[tuple]) -> list[tuple]:
    """`restore` items with their bytes as frames of their own (squall.engine.resident.wire)."""
    out = []
    for tid, base, steps in items:
        if base is not None:
            wave, blob, fixed = base
            if fixed is not None and fixed.blob is not None:
                fixed = FixedPart(fixed.token, wire.blob(fixed.blob), fixed.made)
            base = (wave, wire.blob(blob), fixed)
        out.append((tid, base, [(w, now, [wire.blob(b) for b in blobs]) for w, now, blobs in steps]))
    return out


class SubmittedWave:
    """A wave on its way: `result()` waits for it (raises WaveLost when it was lost); `drop()`
    waits for it and throws its result away (a wave before it was lost)."""

    def __init__(self, executor: ResidentExecutor, wave: int, job: Future | None, snapshot: bool, seq: int = 0):
        self.executor = executor
        self.wave = wave
        self.job = job
        self.snapshot = snapshot
        self.seq = seq  # the executor's count of waves submitted, this one included

    def result(self) -> WaveOutput:
        if self.job is None:
            return WaveOutput()
        try:
            out = self.job.result()
        except WaveLost:
            self.executor._lost()
            raise
        self.executor._settled(self.wave, self.snapshot, self.seq)
        return out

    def drop(self) -> None:
        if self.job is None:
            return
        try:
            self.job.result()
        except Exception:  # noqa: BLE001, S110 - its wave runs again from the last good state
            pass
        self.executor._lost()

