"""The wave coordinator: the driver's loop. Each wave it asks every spout task for tuples,
runs them through the topology on an executor, folds the ack messages into the XOR ledger,
and calls `ack`/`fail` on the spouts. Timeouts rotate here, on the coordinator's clock.
"""

from __future__ import annotations

import copy
import inspect
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from squall.api.config import Config, effective_conf
from squall.api.topology import StormTopology
from squall.engine.batch import TupleBatch, select_roots
from squall.engine.gc_tuning import tune_gc
from squall.engine.task import SpoutTask
from squall.engine.wave import Captured, Executor, WaveLost, WaveOutput, add_captured, merge_captured, merge_outputs
from squall.observe.dead_letter import make_sink
from squall.observe.errors import ErrorRecord
from squall.observe.stats import ComponentStats
from squall.reliability.ids import RootIdGenerator
from squall.reliability.ledger import XorLedger
from squall.reliability.pending import TIMEOUT, FailReason, SpoutPending

log = logging.getLogger("squall")

MAX_ERRORS_KEPT = 1000


def _takes_reason(fn: Callable) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "reason" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _msg_key(task: int, msg_id: Any) -> tuple[int, Any]:
    try:
        hash(msg_id)
        return task, msg_id
    except TypeError:
        return task, repr(msg_id)


@dataclass
class WaveSummary:
    wave: int
    spout_emitted: int
    executed: int
    acked: int
    failed: int
    secs: float

    @property
    def progressed(self) -> bool:
        return bool(self.spout_emitted or self.executed or self.acked or self.failed)


class Coordinator:
    def __init__(self, name: str, topology: StormTopology, conf: dict | None, executor: Executor, clock: Any,
                 capture: bool = False):
        self.name = name
        self.topology = topology
        self.conf = effective_conf(conf)
        self.executor = executor
        self.clock = clock
        self.ackers = int(self.conf[Config.TOPOLOGY_ACKER_EXECUTORS] or 0)
        self.tracking = self.ackers > 0
        self.ledger = XorLedger(self.ackers) if self.tracking else None
        self.root_ids = RootIdGenerator(self.conf.get(Config.SQUALL_ROOT_SEED))
        self.timeout = float(self.conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS])
        self.timeouts_on = bool(self.conf[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS]) and self.tracking
        self.max_pending = self.conf[Config.TOPOLOGY_MAX_SPOUT_PENDING]
        self.wave_tuples = int(self.conf.get(Config.SQUALL_WAVE_MAX_TUPLES) or executor.default_wave_tuples)
        self.wave_secs = float(self.conf[Config.SQUALL_WAVE_MAX_SECS])
        self.spouts: list[SpoutTask] = []
        for comp in topology.spouts:
            spec = topology.specs[comp]
            conf_c = {**self.conf, **spec.conf}
            for i in range(spec.parallelism):
                self.spouts.append(SpoutTask(topology, comp, i, conf_c, copy.deepcopy(spec.obj), capture))
        self._spout_by_task = {s.task_id: s for s in self.spouts}
        self._fail_takes_reason = {s.task_id: _takes_reason(s.spout.fail) for s in self.spouts}
        self.pending: dict[int, SpoutPending] = {s.task_id: SpoutPending() for s in self.spouts}
        self._root_task: dict[int, int] = {}  # root -> spout task id, for pending trees
        self.stats = {c: ComponentStats("spout" if s.is_spout else "bolt", s.parallelism)
                      for c, s in topology.specs.items()}
        self.errors: list[ErrorRecord] = []
        self.error_count = 0
        self.captured: Captured = {}
        self.wave = 0
        self.waves_done = 0
        self.next_rotation = clock.now() + self.timeout
        self._spout_roots: list[tuple[np.ndarray, np.ndarray]] = []  # this wave's (roots, init values)
        # Lost waves: attempts per (spout task, msg id), and this wave's roots' msg ids and values.
        self.max_replays = int(self.conf[Config.SQUALL_MAX_REPLAYS])
        self.attempts: dict[tuple[int, Any], int] = {}
        self._wave_msgs: dict[int, tuple[int, Any, list]] = {}
        self.dead_letters = make_sink(self.conf)
        self.dead_lettered = 0
        self.lost_waves = 0
        self._dead_roots: list[int] = []
        self.lock = threading.RLock()
        self.closed = False

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        tune_gc(self.conf)
        self.executor.start()
        for st in self.spouts:
            st.open()
            st.spout.activate()  # as Storm: an active topology's spouts are activated after open
            self._collect_late_errors(st)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
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
        return sum(len(p) for p in self.pending.values())

    # -- one wave -------------------------------------------------------------------------

    def run_wave(self) -> WaveSummary:
        with self.lock:
            t0 = time.perf_counter()
            self.wave += 1
            outputs: list[tuple[int, TupleBatch]] = []
            emitted = 0
            for st in self.spouts:
                if not st.active:
                    continue
                res = self._call_spout(st)
                emitted += res.emitted
                outputs.extend(res.outputs)
            empty = np.zeros(0, np.uint64)
            init_roots = np.concatenate([r for r, _ in self._spout_roots]) if self._spout_roots else empty
            init_vals = np.concatenate([v for _, v in self._spout_roots]) if self._spout_roots else empty
            self._spout_roots = []
            wave_out = self._execute(outputs, init_roots, True) if outputs else WaveOutput()
            self._wave_msgs = {}
            acked, failed = self._apply(wave_out, init_roots, init_vals)
            failed += self._rotate_if_due()
            self.waves_done += 1
            return WaveSummary(self.wave, emitted, wave_out.executed, acked, failed, time.perf_counter() - t0)

    def _call_spout(self, st: SpoutTask):
        res = st.begin()
        budget = self.wave_tuples
        pending = self.pending[st.task_id]
        if self.tracking and self.max_pending:
            budget = min(budget, int(self.max_pending) - len(pending))
        deadline = time.perf_counter() + self.wave_secs
        if budget > 0:
            next_tuple = st.spout.next_tuple
            while len(st.collector._emits) < budget:
                before = len(st.collector._emits)
                try:
                    next_tuple()
                except Exception as e:  # noqa: BLE001 - a spout error is reported, the topology goes on
                    res.errors.append(ErrorRecord.from_exception(st.component, st.task_id, e, kind="error"))
                    break
                if len(st.collector._emits) == before or time.perf_counter() > deadline:
                    break
        res, msg_ids, roots, vals = st.end(self.root_ids.take, self.tracking)
        stats = self.stats[st.component]
        stats.emitted += res.emitted
        self._record(res.errors)
        if res.captured:
            add_captured(self.captured, st.component, st.task_id, res.captured)
        if self.tracking:
            if len(roots):
                rl = roots.tolist()
                pending.add(rl, msg_ids, self.clock.now())
                self._root_task.update(dict.fromkeys(rl, st.task_id))
                self._spout_roots.append((roots, vals))
                for r, m, v in zip(rl, msg_ids, st.last_values):
                    self._wave_msgs[r] = (st.task_id, m, v)
        else:
            for m in msg_ids:  # no ackers: at-most-once, acked as soon as emitted
                self._spout_ack(st, m)
        return res

    # -- lost waves -----------------------------------------------------------------------

    def _key(self, root: int) -> tuple[int, Any] | None:
        got = self._wave_msgs.get(root)
        if got is None:
            return None
        task, msg_id = got[0], got[1]
        # A spout that replays under new msg ids (Trident: an attempt number) says what stays the same.
        replay_key = getattr(self._spout_by_task[task].spout, "replay_key", None)
        return _msg_key(task, replay_key(msg_id) if replay_key is not None else msg_id)

    def _execute(self, outputs: list[tuple[int, TupleBatch]], roots: np.ndarray, keep_untracked: bool) -> WaveOutput:
        """Run a wave's spout output. If its job is lost: the first time, every root in it fails
        (reason "lost") and is replayed by its spout; when a root that was lost before is in a
        lost wave again, the wave is split in halves, recursively, so the roots that kill it
        are isolated and the others complete."""
        try:
            return self.executor.run_wave(outputs, self.wave)
        except WaveLost as e:
            self.lost_waves += 1
            log.warning("%s: wave %d lost (%d roots): %s", self.name, self.wave, len(roots), e)
            self._record([ErrorRecord.from_exception("__wave", -1, f"WaveLost: {e}", kind="lost")])
            suspects = any(self.attempts.get(self._key(r), 0) for r in roots.tolist())
            if len(roots) <= 1 or not suspects:
                return self._lost(roots, str(e))
        mid = len(roots) // 2
        parts = []
        for half, untracked in ((roots[:mid], keep_untracked), (roots[mid:], False)):
            sub = [(t, b2) for t, b in outputs if (b2 := select_roots(b, half, untracked)) is not None]
            if sub:
                self.wave += 1  # every job gets its own wave number (the carried state's version)
                parts.append(self._execute(sub, half, untracked))
        return merge_outputs(parts) if parts else WaveOutput()

    def _lost(self, roots: np.ndarray, error: str) -> WaveOutput:
        out = WaveOutput()
        for r in roots.tolist():
            key = self._key(r)
            n = self.attempts[key] = self.attempts.get(key, 0) + 1
            if n >= self.max_replays:
                self._dead_letter(r, n, error)
            else:
                out.fail_roots.append(r)
                out.fail_reasons.append(FailReason("lost", error=error))
        return out

    def _dead_letter(self, root: int, attempts: int, error: str) -> None:
        """Write the root's tuple to the dead-letter sink and ack it at its spout: handled, not replayed."""
        task, msg_id, values = self._wave_msgs[root]
        st = self._spout_by_task[task]
        self.dead_letters.write({"topology": self.name, "component": st.component, "task": task,
                                 "msg_id": msg_id, "values": values, "attempts": attempts, "error": error})
        self.dead_lettered += 1
        self.attempts.pop(self._key(root), None)
        self._dead_roots.append(root)  # started in the ledger with this wave, forgotten right after
        self._root_task.pop(root, None)
        self.pending[task].pop_many(np.array([root], np.uint64))
        log.error("%s: %s[%d] msg %r dead-lettered after %d lost waves: %s", self.name, st.component, task,
                  msg_id, attempts, error)
        self._spout_ack(st, msg_id)

    def _apply(self, out: WaveOutput, init_roots: np.ndarray, init_vals: np.ndarray) -> tuple[int, int]:
        for comp, ts in out.stats.items():
            self.stats[comp].add_counters(*ts.counters)
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
        by_task: dict[int, list[int]] = {}
        root_task = self._root_task
        for r in roots.tolist():
            t = root_task.pop(r, None)
            if t is not None:
                by_task.setdefault(t, []).append(r)
        n = 0
        for task, rs in by_task.items():
            st = self._spout_by_task[task]
            items = self.pending[task].pop_many(np.array(rs, np.uint64))
            stats = self.stats[st.component]
            if reasons is None:
                lat = np.fromiter((now - e[2] for e in items), np.float64, len(items))
                stats.complete.add(lat)
                stats.complete_sum += float(lat.sum())
                stats.acked += len(items)
                for _r, m, _t in items:
                    if self.attempts:
                        replay_key = getattr(st.spout, "replay_key", None)
                        self.attempts.pop(_msg_key(task, replay_key(m) if replay_key else m), None)
                    self._spout_ack(st, m)
            else:
                stats.failed += len(items)
                for r, m, _t in items:
                    self._spout_fail(st, m, reasons.get(r, default or FailReason("failed")))
            n += len(items)
        return n

    def _spout_ack(self, st: SpoutTask, msg_id: Any) -> None:
        try:
            st.spout.ack(msg_id)
        except Exception as e:  # noqa: BLE001
            self._record([ErrorRecord.from_exception(st.component, st.task_id, e, msg_id)])

    def _spout_fail(self, st: SpoutTask, msg_id: Any, reason: FailReason) -> None:
        try:
            if self._fail_takes_reason[st.task_id]:
                st.spout.fail(msg_id, reason=reason)
            else:
                st.spout.fail(msg_id)
        except Exception as e:  # noqa: BLE001
            self._record([ErrorRecord.from_exception(st.component, st.task_id, e, msg_id)])
        self._collect_late_errors(st)

    def _collect_late_errors(self, st: SpoutTask) -> None:
        if st._late_errors:
            self._record(st._late_errors)
            st._late_errors = []

    def _record(self, errors: list[ErrorRecord]) -> None:
        if not errors:
            return
        for e in errors:
            if e.component in self.stats:
                self.stats[e.component].errors += 1
            log.warning("%s: %s", self.name, e)
        self.error_count += len(errors)
        self.errors.extend(errors)
        if len(self.errors) > MAX_ERRORS_KEPT:
            del self.errors[: len(self.errors) - MAX_ERRORS_KEPT]

    # -- time -----------------------------------------------------------------------------

    def fire_due(self) -> int:
        """Fire timeouts that are due on the clock now."""
        with self.lock:
            return self._rotate_if_due()

    def stats_dict(self) -> dict[str, dict[str, Any]]:
        # Read without the wave lock: waves follow each other back to back and a reader would
        # starve; counters are plain ints, so a read between two of them is merely a bit stale.
        return {c: s.as_dict() for c, s in self.stats.items()}
