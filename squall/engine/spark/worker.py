"""What runs inside Spark tasks: one wave's step for one partition (a bolt task), and the
acker's reduce. Knows the record kinds that travel between partitions, nothing of any bolt.

Records are (destination partition, record) pairs; a record is one of
  ("in", [TupleBatch, ...])         input for the destination task
  ("state", wave, bytes)            a task's carried instance, as of the end of `wave`
  ("ack", roots, xors)              ack messages, already folded per root (uint64 arrays)
  ("fail", [root, ...], [reason])   failed roots and why
  ("report", component, task, counters, errors, captured)
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from squall.engine.gc_tuning import tune_gc
from squall.engine.task import BoltTask
from squall.reliability.anchoring import combine

_U64 = np.uint64


@dataclass(frozen=True)
class Layout:
    """Which bolt task each partition is, at which level it runs, where each task lives."""

    parts: tuple[tuple[str, int], ...]  # partition -> (component, task index)
    levels: tuple[int, ...]  # partition -> topological level of its component
    part_of_task: dict[int, int]  # global task id -> partition
    depth: int
    ackers: int


# Per Python worker process: the topology (unpickled once), and the task instances this
# worker ran last, so a worker that already holds the latest version skips the unpickling.
_TOPOLOGIES: dict[str, tuple] = {}
_TASKS: dict[tuple[str, int], tuple[int, BoltTask]] = {}


def identity(key: int) -> int:
    """The partition function: records are keyed by their destination partition."""
    return key


def _setup(uid: str, blob: Any) -> tuple:
    got = _TOPOLOGIES.get(uid)
    if got is None:
        got = _TOPOLOGIES[uid] = pickle.loads(blob.value)
        tune_gc(got[1])
    return got


def _task_for(uid: str, setup: tuple, p: int, state: tuple | None) -> BoltTask:
    from pyspark import cloudpickle  # noqa: PLC0415

    topology, conf, layout, capture = setup
    comp, idx = layout.parts[p]
    conf_c = {**conf, **topology.specs[comp].conf}
    cached = _TASKS.pop((uid, p), None)  # taken out: a task that dies mid-run must not leave a half-updated copy
    if state is None:
        task = BoltTask(topology, comp, idx, conf_c, copy.deepcopy(topology.specs[comp].obj), capture)
        task.prepare()
        return task
    if cached is not None and cached[0] == state[1]:
        return cached[1]
    return BoltTask.restore(topology, comp, idx, conf_c, state[2], cloudpickle.loads, capture)


def run_level(uid: str, blob: Any, wave: int, level: int, spout_in: dict[int, bytes] | None = None) -> Any:
    """The function of stage `level` of a wave, over partitions (one per bolt task).

    Stage 1 runs over the previous wave's cached output, and gets this wave's spout output in
    its closure (Spark ships a stage's closure once per executor), pickled per partition so a
    task unpickles only its own part."""

    def run(p: int, it: Iterable) -> Iterator[tuple[int, tuple]]:
        if level == 1:
            mine = spout_in.get(p) if spout_in else None
            records = [r for _, r in it if r[0] == "state"]
            if mine is not None:
                records.append(("in", pickle.loads(mine)))
            it = ((p, r) for r in records)
        return _run_partition(uid, _setup(uid, blob), wave, level, p, it)

    return run


def _run_partition(uid: str, setup: tuple, wave: int, level: int, p: int, it: Iterable) -> Iterator[tuple[int, tuple]]:
    from pyspark import cloudpickle  # noqa: PLC0415

    layout: Layout = setup[2]
    records = [r for _, r in it]
    state = None
    inputs: list = []
    roots: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    other: list[tuple] = []
    for rec in records:
        kind = rec[0]
        if kind == "in":
            inputs.extend(rec[1])
        elif kind == "state":
            state = rec
        elif kind == "ack":
            roots.append(rec[1])
            vals.append(rec[2])
        else:
            other.append(rec)
    if layout.levels[p] == level and (inputs or state is None):
        task = _task_for(uid, setup, p, state)
        res = task.run(inputs, wave)
        by_dest: dict[int, list] = {}
        for target, batch in res.outputs:
            by_dest.setdefault(layout.part_of_task[target], []).append(batch)
        for dest, batches in by_dest.items():
            yield dest, ("in", batches)
        roots.extend(res.ack_roots)
        vals.extend(res.ack_vals)
        if res.fail_roots:
            other.append(("fail", res.fail_roots, res.fail_reasons))
        if res.executed or res.errors or res.captured:
            other.append(("report", res.component, res.task,
                          (res.executed, res.acked, res.failed, res.emitted, res.exec_secs),
                          res.errors, res.captured))
        yield p, ("state", wave, task.snapshot(cloudpickle.dumps))
        _TASKS[(uid, p)] = (wave, task)
    else:  # not this partition's level, or nothing to do: pass everything on unchanged
        if state is not None:
            yield p, state
        if inputs:
            yield p, ("in", inputs)
    if roots:
        r, v = combine(np.concatenate(roots), np.concatenate(vals))  # fold per root before the shuffle
        yield p, ("ack", r, v)
    for rec in other:
        yield p, rec


def to_ackers(ackers: int) -> Any:
    k = _U64(ackers)

    def route(it: Iterable[tuple[int, tuple]]) -> Iterator[tuple[int, tuple]]:
        for _, rec in it:
            kind = rec[0]
            if kind == "ack":
                if ackers == 1:
                    yield 0, rec
                    continue
                part = rec[1] % k
                for a in range(ackers):
                    m = part == a
                    if m.any():
                        yield a, ("ack", rec[1][m], rec[2][m])
            elif kind in ("fail", "report"):
                yield 0, rec

    return route


def acker_reduce(it: Iterable[tuple[int, tuple]]) -> Iterator[tuple]:
    """One acker partition: fold every ack message per root; one row per root goes to the driver."""
    roots, vals, other = [], [], []
    for _, rec in it:
        if rec[0] == "ack":
            roots.append(rec[1])
            vals.append(rec[2])
        else:
            other.append(rec)
    if roots:
        r, v = combine(np.concatenate(roots), np.concatenate(vals))
        yield ("ack", r, v)
    yield from other
