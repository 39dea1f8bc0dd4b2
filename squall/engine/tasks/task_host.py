"""The one place bolt tasks are made, restored and stepped, whichever engine runs them: the
local engine's executor, and a slot on a Spark executor. A task is made from its component's
spec on first use (a copy of the component's instance, its effective conf), restored from a
snapshot (`BoltTask.snapshot`), and stepped a wave at a time: it runs its inputs, its outputs are
sealed (checked that they can cross a task boundary, and pickled once where they will), and its
ack messages are taken apart from the rest of its result, which travels on as counters and errors.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass
from typing import Any

import numpy as np

from squall.api.config import component_conf
from squall.api.topology import StormTopology
from squall.engine.tasks.bolt_task import BoltTask
from squall.engine.tasks.fixed_parts import FixedPart
from squall.engine.tasks.sealing import portable_captured, seal_outputs
from squall.engine.tasks.task_kinds import bolt_task_class
from squall.engine.tasks.task_result import Counters, TaskResult
from squall.reliability.batch import TupleBatch


@dataclass
class Stepped:
    """What one task's step of a wave gives: its sealed outputs, its ack messages (folded arrays,
    or None), and the rest of its result (outputs and ack messages taken out of it)."""

    outputs: list[tuple[int, Any]]  # (target task, batch, or its bytes when sealed to bytes)
    ack_roots: np.ndarray | None
    ack_vals: np.ndarray | None
    result: TaskResult
    counters: Counters  # as the task counted them, before its outputs were taken out


class TaskHost:
    """The bolt tasks of one topology in one process."""

    def __init__(self, topology: StormTopology, conf: dict, capture: bool = False):
        self.topology = topology
        self.conf = conf
        self.capture = capture
        self.tasks: dict[int, BoltTask] = {}

    def where(self, tid: int) -> tuple[str, int]:
        """The component of task `tid` and its index among that component's tasks."""
        comp = self.topology.task_component[tid]
        return comp, self.topology.task_ids[comp].index(tid)

    def task(self, tid: int) -> BoltTask:
        """The task, made on first use."""
        task = self.tasks.get(tid)
        if task is None:
            task = self.tasks[tid] = self.make(tid)
        return task

    def make(self, tid: int) -> BoltTask:
        """A task as the topology makes it: a copy of its component's instance, not yet prepared."""
        comp, idx = self.where(tid)
        spec = self.topology.specs[comp]
        return bolt_task_class(spec.obj)(self.topology, comp, idx, component_conf(self.conf, spec),
                                         copy.deepcopy(spec.obj), self.capture)

    def restore(self, tid: int, blob: bytes, loads: Any, fixed: FixedPart | None, wave: int) -> BoltTask:
        """The task as its snapshot `blob` (BoltTask.snapshot) had it, in place of the one held."""
        comp, idx = self.where(tid)
        spec = self.topology.specs[comp]
        task = bolt_task_class(spec.obj).restore(self.topology, comp, idx, component_conf(self.conf, spec), blob,
                                                 loads, self.capture, fixed, wave)
        self.tasks[tid] = task
        return task

    def step(self, tid: int, inputs: list[Any], wave: int, now: float | None, to_bytes: bool) -> Stepped:
        """One wave of task `tid` on `inputs` (batches, or their pickled bytes)."""
        batches: list[TupleBatch] = [pickle.loads(b) if type(b) is bytes else b for b in inputs]
        res = self.task(tid).run(batches, wave, now)
        outputs = seal_outputs(res, to_bytes=to_bytes)
        counters = res.counters
        roots = vals = None
        if res.ack_roots:
            roots = np.concatenate(res.ack_roots) if len(res.ack_roots) > 1 else res.ack_roots[0]
            vals = np.concatenate(res.ack_vals) if len(res.ack_vals) > 1 else res.ack_vals[0]
        res.outputs, res.ack_roots, res.ack_vals = [], [], []
        if to_bytes and res.captured:
            res.captured = portable_captured(res.captured)
        return Stepped(outputs, roots, vals, res, counters)

    def cleanup(self) -> list[tuple[BoltTask, BaseException]]:
        """Every task's cleanup; what raised (a shutdown goes on)."""
        failed = []
        for task in self.tasks.values():
            try:
                task.cleanup()
            except Exception as e:  # noqa: BLE001 - cleanup errors must not hide the shutdown
                failed.append((task, e))
        return failed
