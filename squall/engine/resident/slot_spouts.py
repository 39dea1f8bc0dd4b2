"""A slot's spout tasks: opened or restored, their verdicts applied, and the batches they sent
kept until a confirmed snapshot holds them (a re-run sends them again; a lost wave fails them)."""

from __future__ import annotations

import copy
import logging
import time

import numpy as np

from squall.api.config import Config, component_conf
from squall.engine.resident.messages import DRIVER, Report
from squall.engine.tasks.spout_runner import SpoutRunner, take_kept
from squall.engine.tasks.spout_task import SpoutTask
from squall.observe.errors import ErrorRecord
from squall.reliability.acker import Verdict

log = logging.getLogger("squall")

OPEN_BACKOFF_FIRST = 0.25  # seconds before a recovered spout's second try to open
OPEN_BACKOFF_MAX = 5.0


class SlotSpouts:
    """The spout side of a slot's topology (a part of SlotTopology)."""

    def _open_spout(self, tid: int, retry_secs: float = 0.0) -> SpoutRunner:
        """Spout task `tid` made from its spec, opened and activated. Made again by a recovery
        (`retry_secs` > 0), a spout whose `open` raises is made anew and tried again with backoff
        for that long, as Storm's supervisor restarts a worker whose spout could not open: the
        broker it connects to may be unreachable for a moment (a cut, a loaded host)."""
        comp = self.topology.task_component[tid]
        spec = self.topology.specs[comp]
        conf = component_conf(self.setup.conf, spec)
        deadline = time.monotonic() + retry_secs
        delay, failures = OPEN_BACKOFF_FIRST, []
        while True:
            st = SpoutTask(self.topology, comp, self.topology.task_ids[comp].index(tid), conf,
                           copy.deepcopy(spec.obj), self.setup.capture)
            runner = SpoutRunner(st, conf, self._nackers > 0)
            try:
                st.open()
                if self.active:
                    st.spout.activate()  # as Storm: an active topology's spouts are activated after open
                else:
                    st.active = False
            except Exception as e:
                if time.monotonic() + delay > deadline:
                    if failures:
                        raise RuntimeError(f"spout {comp}[{tid}] could not open in {len(failures) + 1} tries "
                                           f"over {retry_secs:.0f} s (squall.spout.open.retry.secs); the last "
                                           f"error: {type(e).__name__}: {e}") from e
                    raise
                failures.append(ErrorRecord.from_exception(comp, tid, e))
                log.warning("squall slot %d: spout %s[%d] could not open (%s: %s); trying again in %.1f s",
                            self.slot.index, comp, tid, type(e).__name__, e, delay)
                _close_quietly(st)
                time.sleep(delay)
                delay = min(delay * 2, OPEN_BACKOFF_MAX)
                continue
            runner.figures.errors.extend(failures)  # the tries before are the topology's errors to see
            return runner

    def _open_retry_secs(self) -> float:
        return float(self.setup.conf[Config.SQUALL_SPOUT_OPEN_RETRY_SECS])  # the driver's effective conf

    def _restore_spout(self, tid: int, blob: bytes) -> SpoutRunner:
        comp = self.topology.task_component[tid]
        spec = self.topology.specs[comp]
        conf = component_conf(self.setup.conf, spec)
        task = SpoutTask.restore(self.topology, comp, self.topology.task_ids[comp].index(tid), conf,
                                 SpoutRunner.task_blob(blob, self.loads), self.loads, self.setup.capture)
        return SpoutRunner.restore(task, conf, self._nackers > 0, blob, self.loads)

    def _apply_verdicts(self, parts: dict[int, Verdict], rep: Report | None = None) -> None:
        """Each spout task's acks and fails (its spout's ack and fail); what they take counts as
        work of the wave `rep` reports (the load-aware shuffle weighs it)."""
        t0 = time.perf_counter()
        now = self._now()
        for tid, v in parts.items():
            runner = self.runners.get(tid)
            if runner is None:
                continue
            reasons = dict(zip(v.failed.tolist(), v.reasons)) if len(v.failed) else None
            runner.apply(v.completed, v.failed, reasons, now)
        if rep is not None:
            rep.busy_secs += time.perf_counter() - t0

    def _set_active(self, active: bool) -> None:
        self.active = active
        for runner in self.runners.values():
            st = runner.task
            if st.active != active:
                st.active = active
                try:
                    (st.spout.activate if active else st.spout.deactivate)()
                except Exception as e:  # noqa: BLE001 - reported; the topology goes on
                    runner.figures.errors.append(ErrorRecord.from_exception(st.component, st.task_id, e))

    def _copy(self, rid: int, component: str) -> None:
        """A copy of each of `component`'s spout instances here, pickled (or why it cannot be)."""
        out = []
        for tid, runner in self.runners.items():
            if runner.component != component:
                continue
            try:
                out.append((tid, self.dumps(runner.spout), None))
            except Exception as e:  # noqa: BLE001 - said to the caller
                out.append((tid, None, f"{type(e).__name__}: {e}"))
        self.slot.send(DRIVER, ("copy", self.uid, rid, out))

    def _kept_roots(self, rid: int, wave: int) -> None:
        """The roots of kept wave `wave` per spout task here, and which were lost before (a lost wave)."""
        out = {tid: (got.roots, self.runners[tid].suspects(got.msg_ids))
               for tid, got in self.kept.get(wave, {}).items() if tid in self.runners}
        self.slot.send(DRIVER, ("kept_roots", self.uid, rid, out))

    def _fail_lost(self, wave: int, roots: np.ndarray | None, error: str, max_replays: int) -> None:
        """Kept wave `wave` (its `roots`, or all) is lost: its tuples fail, or are dead-lettered
        (SpoutRunner.lose)."""
        letters = []
        for tid in list(self.kept.get(wave, {})):
            got = take_kept(self.kept, wave, tid, roots)
            runner = self.runners.get(tid)
            if runner is not None and got is not None:
                letters.extend(runner.lose(got, error, max_replays, self.setup.conf.get("topology.name", "")))
        if letters:
            self.slot.send(DRIVER, ("dead_letters", self.uid, letters))

    def _trim_kept(self, confirmed: int, keep: frozenset[int]) -> None:
        """The kept waves a confirmed snapshot holds go (not those the driver still runs again)."""
        for n in [n for n in self.kept if n <= confirmed and n not in keep]:
            del self.kept[n]

    def kept_tasks(self) -> set[int]:
        return {tid for per in self.kept.values() for tid in per}

    def _forget_kept(self, tid: int) -> None:
        for n in list(self.kept):
            self.kept[n].pop(tid, None)
            if not self.kept[n]:
                del self.kept[n]

    def _spout_snapshot(self, runner: SpoutRunner) -> bytes | None:
        """A spout task as it is after its pulls (None: its instance does not pickle)."""
        try:
            return runner.snapshot(self.dumps)
        except Exception as e:  # noqa: BLE001 - then its acks wait for snapshots (gated)
            log.debug("squall: spout task %d cannot be snapshotted: %s", runner.task_id, e)
            return None


def _close_quietly(st: SpoutTask) -> None:
    """A spout whose open raised may hold half of what it opened (a connection, a thread)."""
    try:
        st.spout.close()
    except Exception:  # noqa: BLE001, S110 - it failed to open already; its close may fail too
        pass
