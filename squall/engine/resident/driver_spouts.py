"""The driver-bound spouts (`DRIVER_BOUND = True`): they run in the driver, which takes part in
level 0 of every wave for them as a slot does, and spout instances copied from the slots."""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from squall.api.config import component_conf
from squall.api.rebinding import restoring
from squall.engine.driver.wave import add_captured
from squall.engine.resident import wire
from squall.engine.resident.messages import DRIVER, AckPart
from squall.engine.tasks.sealing import dumps
from squall.engine.tasks.spout_runner import SpoutRunner, take_kept
from squall.engine.tasks.spout_task import SpoutTask
from squall.reliability.acker import Verdict
from squall.reliability.settled import Sent

if TYPE_CHECKING:
    from squall.engine.resident.driver import OpenWave

COPY_SECS = 30.0  # how long slots may take to answer the driver's questions


class DriverSpouts:
    """The driver's spout tasks and its part of level 0 (a part of ClusterDriver)."""

    def _make_driver_spouts(self) -> None:
        topology = self.topology
        self.spouts: list[SpoutTask] = []  # the driver-bound ones (executor spouts run in slots)
        self.runners: dict[int, SpoutRunner] = {}
        for tid in self.placement.driver_spouts:
            comp = topology.task_component[tid]
            spec = topology.specs[comp]
            conf_c = component_conf(self.conf, spec)
            st = SpoutTask(topology, comp, topology.task_ids[comp].index(tid), conf_c, copy.deepcopy(spec.obj),
                           self.capture)
            self.spouts.append(st)
            self.runners[tid] = SpoutRunner(st, conf_c, self.tracking)

    def spout_instances(self, component: str | None = None) -> list[Any]:
        """The spout instances of a component (or all): the driver-bound ones as they run, each
        executor one as a copy made now in its slot (it must pickle)."""
        comps = [component] if component is not None else self.topology.spouts
        out: list[Any] = []
        for comp in comps:
            if comp not in self.topology.specs:
                continue
            if any(st.component == comp for st in self.spouts):
                out.extend(st.spout for st in self.spouts if st.component == comp)
            else:
                out.extend(self._copy(comp))
        return out

    def _copy(self, component: str) -> list[Any]:
        from pyspark import cloudpickle  # noqa: PLC0415

        slots = sorted({self.placement.spouts[t] for t in self.topology.task_ids[component]})
        parts = self._ask(slots, lambda rid: ("copy", self.uid, rid, component))
        out = []
        for tid, blob, err in sorted(x for part in parts for x in part):
            if err is not None:
                raise TypeError(f"spout {component!r} (task {tid}) runs in a slot and its instance cannot be copied "
                                f"to the driver ({err}); give its class DRIVER_BOUND = True to run it in the driver")
            with restoring(_Detached()):
                out.append(cloudpickle.loads(blob))
        return out

    def _driver_level0(self, ow: OpenWave, budget: int, source: int | None, roots: np.ndarray | None) -> None:
        """The driver-bound spouts' part of level 0: their pulls (or kept batches) go to the slots
        of their targets, their trees' init values to the ackers' slots."""
        n = ow.marker.wave
        while self.acker_slots and self.verdicts_through < ow.marker.verdicts_through:
            self._handle(*self.inbox.get())  # verdicts of the waves before first (they are on their way)
            self._check()
        now = self.clock.now()
        out: dict[int, dict[int, list]] = {}
        sent: dict[int, list[Sent]] = {}
        init_r: dict[int, list[np.ndarray]] = {}
        init_v: dict[int, list[np.ndarray]] = {}
        for st in self.spouts:
            if source is not None:
                got = take_kept(self.kept, source, st.task_id, roots)
                if got is None:
                    continue
            elif not st.active:
                continue
            else:
                runner = self.runners[st.task_id]
                runner.task.weigh(ow.marker.weights)
                got = runner.pull(budget, now)
                if runner.figures.captured:  # the wave's own emits (a rollback takes them back)
                    add_captured(self._captured_since.setdefault(n, {}), st.component, st.task_id,
                                 runner.figures.captured)
                    runner.figures.captured = None
                ow.emitted += got.emitted
                ow.full = ow.full or got.full
                ow.capped = ow.capped or got.capped
            if self.tracking and len(got.roots):
                self.kept.setdefault(n, {})[st.task_id] = got
            for target, b in got.outputs:
                slot = self.placement.bolts[target]
                settle = getattr(b, "anc_settle", None)
                if settle is not None:
                    sent.setdefault(slot, []).append(Sent(settle, len(b), b.component, b.source_task, target))
                out.setdefault(slot, {}).setdefault(target, []).append(wire.blob(dumps(b)))
            if len(got.roots):
                k = (got.roots % np.uint64(self.ackers)).astype(np.int64)
                for a in np.unique(k).tolist():
                    mine = k == a
                    init_r.setdefault(a, []).append(got.roots[mine])
                    init_v.setdefault(a, []).append(got.init_vals[mine])
        for s in self.participants:
            self.pool.slots[s].send(("level", self.uid, self.epoch, n, 0, DRIVER, out.get(s, {}), sent.get(s, [])))
        if self.tracking:
            parts: dict[int, dict[int, AckPart]] = {s: {} for s in self.acker_slots}
            for k, s in self.placement.ackers.items():
                if k in init_r:
                    parts[s][k] = AckPart(np.concatenate(init_r[k]), np.concatenate(init_v[k]))
            for s, p in parts.items():
                self.pool.slots[s].send(("acks", self.uid, self.epoch, n, DRIVER, p))

    def _verdicts(self, n: int, parts: dict[int, Verdict]) -> None:
        now = self.clock.now()
        for tid, v in parts.items():
            runner = self.runners.get(tid)
            if runner is not None:
                reasons = dict(zip(v.failed.tolist(), v.reasons)) if len(v.failed) else None
                runner.apply(v.completed, v.failed, reasons, now)
        self.verdicts_heard[n] = self.verdicts_heard.get(n, 0) + 1
        while self.verdicts_heard.get(self.verdicts_through + 1, 0) >= len(self.acker_slots):
            self.verdicts_through += 1
            del self.verdicts_heard[self.verdicts_through]

    def _ask(self, slots: list[int], message: Any) -> list:
        """Send each slot message(request id) and wait for all their answers (read off their
        readers' threads, so a wave loop waiting on its inbox does not stand in the way)."""
        with self._reply_cond:
            self._reply_ids += 1
            rid = self._reply_ids
        for s in slots:
            self.pool.slots[s].send(message(rid))
        deadline = time.monotonic() + COPY_SECS
        with self._reply_cond:
            while len(self._replies.get(rid, [])) < len(slots):
                if not self._reply_cond.wait(max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"topology {self.name!r}: slots {slots} did not answer within {COPY_SECS:.0f} s")
            return self._replies.pop(rid)


class _Detached:
    """What a spout instance copied to the driver binds its collector and context to: nothing."""

    collector = None
    context = None
