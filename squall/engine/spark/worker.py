"""What runs inside Spark tasks: one wave's step for one bolt task (a partition of its
level's stage), and the acker's reduce. Knows the record kinds that travel between
partitions, nothing of any bolt.

Records are (destination partition, record) pairs; a record is one of
  ("in", [TupleBatch, ...])            input for the destination task (of the next level)
  ("fwd", level, p, [TupleBatch, ...]) input for task p of a later level, passed on level by level
  ("state", wave, bytes)               a task's carried instance, as of the end of `wave`
  ("ack", roots, xors)                 ack messages, already folded per root (uint64 arrays)
  ("fail", [root, ...], [reason])      failed roots and why
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
    """The bolt tasks of each level (a level's stage has one partition per task) and where
    every task lives: task id -> (level, partition)."""

    levels: tuple[tuple[tuple[str, int], ...], ...]  # levels[L - 1][p] = (component, task index)
    loc: dict[int, tuple[int, int]]
    ackers: int

    @property
    def depth(self) -> int:
        return len(self.levels)

    def width(self, level: int) -> int:
        return len(self.levels[level - 1])


def _make_partitioner(n: int) -> Any:
    def partition(key: int) -> int:
        return key

    partition.__name__ = f"level_{n}_partition"
    return partition


# One partition function object per level (and one for the ackers): Spark compares
# partitioners by the function's identity, and a stage's input (a shuffle) must be recognized as
# partitioned like the cached state it is unioned with, but never like the previous level's.
LEVEL_PARTITIONERS = [_make_partitioner(i) for i in range(1, 257)]
ACKER_PARTITIONER = _make_partitioner(0)


# Per Python worker process: the topology (unpickled once), and the task instances this
# worker ran last, so a worker that already holds the latest version skips the unpickling.
_TOPOLOGIES: dict[str, tuple] = {}
_TASKS: dict[tuple[str, int], tuple[int, BoltTask]] = {}


def _setup(uid: str, blob: Any) -> tuple:
    got = _TOPOLOGIES.get(uid)
    if got is None:
        got = _TOPOLOGIES[uid] = pickle.loads(blob.value)
        tune_gc(got[1])
    return got


def _task_for(uid: str, setup: tuple, level: int, p: int, state: tuple | None) -> BoltTask:
    from pyspark import cloudpickle  # noqa: PLC0415

    topology, conf, layout, capture = setup
    comp, idx = layout.levels[level - 1][p]
    conf_c = {**conf, **topology.specs[comp].conf}
    # Taken out: a task that dies mid-run must not leave a half-updated copy behind.
    cached = _TASKS.pop((uid, comp, idx), None)
    if state is None:
        task = BoltTask(topology, comp, idx, conf_c, copy.deepcopy(topology.specs[comp].obj), capture)
        task.prepare()
        return task
    if cached is not None and cached[0] == state[1]:
        return cached[1]
    return BoltTask.restore(topology, comp, idx, conf_c, state[2], cloudpickle.loads, capture)


def run_level(uid: str, blob: Any, wave: int, level: int, spout_in: dict[int, bytes] | None = None) -> Any:
    """The function of stage `level` of a wave: partition p is task p of that level.

    Stage 1 runs over the previous wave's cached output of level 1, and gets this wave's spout
    output in its closure (Spark ships a stage's closure once per executor), pickled per
    partition so a task unpickles only its own part. Later stages run over the shuffle from the
    level before, unioned (partition by partition, no shuffle) with their cached state."""

    def run(p: int, it: Iterable) -> Iterator[tuple[int, tuple]]:
        records = [r for _, r in it if level > 1 or r[0] == "state"]
        if level == 1 and spout_in and p in spout_in:
            records.extend(pickle.loads(spout_in[p]))
        return _run_partition(uid, _setup(uid, blob), wave, level, p, records)

    return run


def _run_partition(uid: str, setup: tuple, wave: int, level: int, p: int,
                   records: list[tuple]) -> Iterator[tuple[int, tuple]]:
    from pyspark import cloudpickle  # noqa: PLC0415

    layout: Layout = setup[2]
    last = level == layout.depth
    nxt = 0 if last else layout.width(level + 1)
    state = None
    inputs: list = []
    roots: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    other: list[tuple] = []
    onward: dict[tuple[int, int], list] = {}  # (level, partition) -> batches for later levels
    for rec in records:
        kind = rec[0]
        if kind == "in":
            inputs.extend(rec[1])
        elif kind == "fwd":
            if rec[1] == level:
                inputs.extend(rec[3])
            else:
                onward.setdefault((rec[1], rec[2]), []).extend(rec[3])
        elif kind == "state":
            state = rec
        elif kind == "ack":
            roots.append(rec[1])
            vals.append(rec[2])
        else:
            other.append(rec)
    if inputs or state is None:
        task = _task_for(uid, setup, level, p, state)
        res = task.run(inputs, wave)
        for target, batch in res.outputs:
            onward.setdefault(layout.loc[target], []).append(batch)
        roots.extend(res.ack_roots)
        vals.extend(res.ack_vals)
        if res.fail_roots:
            other.append(("fail", res.fail_roots, res.fail_reasons))
        if res.executed or res.errors or res.captured:
            other.append(("report", res.component, res.task,
                          (res.executed, res.acked, res.failed, res.emitted, res.exec_secs),
                          res.errors, res.captured))
        state = ("state", wave, task.snapshot(cloudpickle.dumps))
        _TASKS[(uid, task.component, task.task_index)] = (wave, task)
    yield p, state  # stays in this partition: next wave's state for this task
    for (dest_level, dest_p), batches in onward.items():
        if dest_level == level + 1:
            yield dest_p, ("in", batches)
        else:  # a later level: through the next level's partitions, level by level
            yield dest_p % nxt, ("fwd", dest_level, dest_p, batches)
    # Acks and reports travel on with the data, to the next level, then to the ackers.
    to = p % nxt if nxt else p
    if roots:
        r, v = combine(np.concatenate(roots), np.concatenate(vals))  # fold per root before the shuffle
        yield to, ("ack", r, v)
    for rec in other:
        yield to, rec


def not_state(it: Iterable[tuple[int, tuple]]) -> Iterator[tuple[int, tuple]]:
    return (kr for kr in it if kr[1][0] != "state")


def only_state(it: Iterable[tuple[int, tuple]]) -> Iterator[tuple[int, tuple]]:
    return (kr for kr in it if kr[1][0] == "state")


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
