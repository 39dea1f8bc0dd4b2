"""A slot: one long-lived process holding bolt tasks, of any number of topologies, that answers
the driver's requests in the order they come (`serve`).

The requests, each `(kind, request id, ...)`, answered `("ok", id, payload)` or `("error", id, text)`:
- `load(uid, setup)`: a topology's bolts and conf (cloudpickled), before its first step here;
- `step(uid, wave, now, items, snapshot)`: one wave's inputs for some of its tasks at one level,
  `items` being (task id, [pickled batch, ...]); each task runs them and the answer holds, per task,
  what it sends on (pickled once, here), its ack messages and the rest of its result; with
  `snapshot`, every listed task (with inputs or not) also gives its carried state;
- `restore(uid, tasks)`: rebuild tasks from a snapshot (or from scratch) and run again the steps
  they had taken since, their output thrown away: what a slot started again, or a rollback, needs;
- `drop(uid)`: the topology is gone (its bolts' cleanup runs); `stop`: the slot ends.
"""

from __future__ import annotations

import copy
import logging
import pickle
import time
import traceback
from typing import Any

import numpy as np

from squall.api.config import Config, component_conf
from squall.engine import fixed_parts
from squall.engine.bolt_task import BoltTask
from squall.engine.fixed_parts import FixedPart
from squall.engine.gc_tuning import freeze_after_first_task, gc_paused, tune_gc
from squall.engine.malloc_tuning import tune_malloc
from squall.engine.resident import wire
from squall.engine.sealing import portable_captured, seal_outputs
from squall.engine.task_kinds import bolt_task_class

log = logging.getLogger("squall")


class SlotTopology:
    """One topology's bolt tasks in this slot, made on first use."""

    def __init__(self, setup: bytes):
        from pyspark import cloudpickle  # noqa: PLC0415 - bolts may be lambdas or local classes

        self.topology, self.conf, self.capture = cloudpickle.loads(setup)
        self.dumps, self.loads = cloudpickle.dumps, cloudpickle.loads
        tune_gc(self.conf)
        tune_malloc(self.conf)
        self.gc_tune = self.conf.get(Config.SQUALL_GC_TUNE, True)
        self.tasks: dict[int, BoltTask] = {}
        self.fixed_sent: set[int] = set()  # fixed attributes' tokens the driver has the bytes of

    def _where(self, tid: int) -> tuple[str, int]:
        comp = self.topology.task_component[tid]
        return comp, self.topology.task_ids[comp].index(tid)

    def task(self, tid: int) -> BoltTask:
        task = self.tasks.get(tid)
        if task is None:
            task = self.tasks[tid] = self._fresh(tid)
        return task

    def _fresh(self, tid: int) -> BoltTask:
        comp, idx = self._where(tid)
        spec = self.topology.specs[comp]
        return bolt_task_class(spec.obj)(self.topology, comp, idx, component_conf(self.conf, spec),
                                         copy.deepcopy(spec.obj), self.capture)

    def step(self, wave: int, now: float | None, items: list[tuple[int, list[bytes]]], snapshot: bool) -> list:
        out = []
        for tid, blobs in items:
            t0 = time.perf_counter()
            task = self.task(tid)
            sent: list = []
            roots = vals = res = counters = None
            if blobs:
                with gc_paused(self.gc_tune):
                    res = task.run([pickle.loads(b) for b in blobs], wave, now)
                    sent = [(target, wire.blob(b)) for target, b in seal_outputs(res, to_bytes=True)]
                if res.ack_roots:
                    roots, vals = np.concatenate(res.ack_roots), np.concatenate(res.ack_vals)
                counters = res.counters
                res.outputs, res.ack_roots, res.ack_vals = [], [], []  # they travel apart
                if res.captured:
                    res.captured = portable_captured(res.captured)
            t1 = time.perf_counter()
            snap = self._snapshot(task, wave) if snapshot else None
            out.append((tid, sent, roots, vals, res, counters, snap, t1 - t0, time.perf_counter() - t1))
        freeze_after_first_task()
        return out

    def _snapshot(self, task: BoltTask, wave: int) -> tuple:
        """The task's carried state as of this step; its fixed attributes' bytes only the first time."""
        blob, fixed = task.snapshot(self.dumps, wave)
        if fixed is not None:
            if fixed.token in self.fixed_sent or fixed.blob is None:
                fixed = FixedPart(fixed.token, None, fixed.made)
            else:
                self.fixed_sent.add(fixed.token)
                fixed = FixedPart(fixed.token, wire.blob(fixed.blob), fixed.made)
        return wire.blob(blob), fixed

    def restore(self, tasks: list[tuple[int, tuple | None, list]]) -> int:
        """Each task from its snapshot (wave, blob, fixed part) or from scratch, then its steps
        since, run again; returns how many steps were run."""
        ran = 0
        for tid, base, steps in tasks:
            if base is None:
                task = self._fresh(tid)
            else:
                wave, blob, fixed = base
                comp, idx = self._where(tid)
                spec = self.topology.specs[comp]
                task = bolt_task_class(spec.obj).restore(self.topology, comp, idx, component_conf(self.conf, spec),
                                                         blob, self.loads, self.capture, fixed, wave)
                if fixed is not None:
                    self.fixed_sent.add(fixed.token)
            with gc_paused(self.gc_tune):
                for wave, now, blobs in steps:
                    task.run([pickle.loads(b) for b in blobs], wave, now)
                    ran += 1
            self.tasks[tid] = task
        return ran

    def drop(self) -> None:
        for task in self.tasks.values():
            try:
                task.cleanup()
            except Exception:  # noqa: BLE001 - a bolt's cleanup must not keep the slot from going on
                log.exception("squall slot: cleanup of %s[%d] raised", task.component, task.task_id)
            fixed_parts.drop(task._fixed_key())
        self.tasks.clear()


def serve(conn: Any) -> None:
    """Answer the driver's requests, in order, until it says stop or goes away."""
    held: dict[str, SlotTopology] = {}
    while True:
        try:
            msg = wire.recv(conn)
        except (EOFError, OSError):
            break
        except Exception as e:  # noqa: BLE001 - a request this process cannot unpickle: it alone fails
            msg = ("unreadable", None, f"{type(e).__name__}: {e}")
        kind, rid, args = msg[0], msg[1], msg[2:]
        try:
            if kind == "stop":
                wire.send(conn, ("ok", rid, None))
                break
            reply = ("ok", rid, _handle(held, kind, args))
        except Exception as e:  # noqa: BLE001 - the driver decides what a failed request costs
            reply = ("error", rid, f"{type(e).__name__}: {e}", traceback.format_exc())
        try:
            wire.send(conn, reply)
        except (EOFError, OSError):
            break
    for topo in held.values():
        topo.drop()


def _handle(held: dict[str, SlotTopology], kind: str, args: tuple) -> Any:
    if kind == "step":
        uid, wave, now, items, snapshot = args
        return held[uid].step(wave, now, items, snapshot)
    if kind == "load":
        uid, setup = args
        if uid not in held:
            held[uid] = SlotTopology(setup)
        return None
    if kind == "restore":
        uid, tasks = args
        return held[uid].restore(tasks)
    if kind == "drop":
        topo = held.pop(args[0], None)
        if topo is not None:
            topo.drop()
        return None
    if kind == "unreadable":
        raise ValueError(f"the slot could not read the request: {args[0]}")
    raise ValueError(f"a slot does not know the request {kind!r}")
