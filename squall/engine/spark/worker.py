"""What runs inside Spark tasks: one wave's step for one bolt task (a partition of its
level's stage), and the acker's reduce. Knows the record kinds that travel between
partitions, nothing of any bolt.

Records are (destination partition, record) pairs; the record kinds are in records.py. A
level's step writes them already keyed for the shuffle to the next level (what PySpark's
partitionBy would make in a second Python pass): an 8-byte partition key, then a pickled list
of the pairs for that partition. The JVM caches that output (the task's State for its next
wave is in it) and shuffles it as it is, so each task of a wave is one Python pass. Tasks read
raw elements (`records_of`): the shuffle's pickled lists and, from the cache, keys and lists.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.serializers import pack_long

from squall.api.config import Config, component_conf
from squall.engine.bolt_task import BoltTask
from squall.engine.gc_tuning import freeze_after_first_task, gc_paused, tune_gc
from squall.engine.malloc_tuning import tune_malloc
from squall.engine.sealing import portable_captured, seal_outputs
from squall.engine.spark.records import Acks, Fails, Forward, Inputs, Report, Settles, State
from squall.engine.spark.spout_input import Carried, records_for
from squall.engine.task_kinds import bolt_task_class
from squall.engine.task_result import TaskResult
from squall.reliability.anchoring import combine

_U64 = np.uint64
KEY_BYTES = len(pack_long(0))  # a partition key in a level's keyed output
STATE_KEY = 1 << 40  # set in a State's key; the JVM's partitioner takes the key's low 32 bits


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
        tune_malloc(got[1])
    return got


def _task_for(uid: str, setup: tuple, level: int, p: int, state: tuple | None) -> BoltTask:
    from pyspark import cloudpickle  # noqa: PLC0415

    topology, conf, layout, capture = setup
    comp, idx = layout.levels[level - 1][p]
    conf_c = component_conf(conf, topology.specs[comp])
    # Taken out: a task that dies mid-run must not leave a half-updated copy behind.
    cached = _TASKS.pop((uid, comp, idx), None)
    kind = bolt_task_class(topology.specs[comp].obj)
    if state is None:  # prepared on first use, in run()
        return kind(topology, comp, idx, conf_c, copy.deepcopy(topology.specs[comp].obj), capture)
    if cached is not None and cached[0] == state.wave:
        return cached[1]
    return kind.restore(topology, comp, idx, conf_c, state.blob, cloudpickle.loads, capture, state.fixed, state.wave)


def run_level(uid: str, blob: Any, wave: int, level: int, spout_in: Carried | None = None,
              now: float | None = None) -> Any:
    """The function of stage `level` of a wave: partition p is task p of that level.

    Stage 1 runs over the previous wave's cached output of level 1, and gets this wave's spout
    output through its closure, pickled per partition so a task reads and unpickles only its
    own part (from a file on a local master: engine/spark/spout_input.py). Later stages run
    over the shuffle from the level before, unioned (partition by partition, no shuffle) with
    their cached state."""

    def run(p: int, it: Iterable[bytes]) -> Iterator[bytes]:
        setup = _setup(uid, blob)
        # The collector stays paused for the whole step, until its inputs, tuples and unsealed
        # outputs are dropped: freed by reference counting, they take back the allocation count
        # they ran up, so no collection scans a wave's worth of objects still alive (it did on
        # every task's return: 9% of the workers' CPU on word count).
        with gc_paused(setup[1].get(Config.SQUALL_GC_TUNE, True)):
            records = this_wave(records_of(it), wave)
            if level == 1:
                records.extend(records_for(spout_in, p))
            out = _run_partition(uid, setup, wave, level, p, records, now)
            del records
            keyed = keyed_for_shuffle(out)
            del out
        freeze_after_first_task()
        return iter(keyed)

    return run


def records_of(it: Iterable[bytes]) -> Iterator[tuple[int, tuple]]:
    """The (partition, record) pairs in a task's raw input: pickled lists of pairs, and (in a
    level's cached output) the 8-byte partition key before each list, skipped here."""
    for b in it:
        if len(b) != KEY_BYTES:  # a pickled list of pairs is never 8 bytes long
            yield from pickle.loads(b)


def this_wave(pairs: Iterable[tuple[int, tuple]], wave: int) -> list[tuple]:
    """A level's records for this wave: its own State, from its output of an earlier wave (the
    cached side), and this wave's records. The level before's State, of this wave, came along
    in the shuffle and is not this task's."""
    return [r for _, r in pairs if (r.wave < wave if type(r) is State else r.wave == wave)]


def keyed_for_shuffle(out: list[tuple[int, tuple]]) -> list[bytes]:
    """`out` as the JVM's PairwiseRDD takes it: per destination partition, its key, then the
    pickled list of its (partition, record) pairs. The State goes alone, under its partition's
    key with STATE_KEY set, so `without_states` can leave it out reading keys only."""
    by_dest: dict[int, list[tuple[int, tuple]]] = {}
    for pair in out:
        dest = pair[0] | STATE_KEY if type(pair[1]) is State else pair[0]
        by_dest.setdefault(dest, []).append(pair)
    keyed: list[bytes] = []
    for dest, pairs in by_dest.items():
        keyed.append(pack_long(dest))
        keyed.append(pickle.dumps(pairs, protocol=pickle.HIGHEST_PROTOCOL))
    return keyed


def without_states(it: Iterable[bytes]) -> Iterator[bytes]:
    """A level's keyed output without its States, still keyed (keys and values alternate): what
    a level holding much shuffles on, so its States do not travel to the next level."""
    it = iter(it)
    for key in it:
        value = next(it)
        if not int.from_bytes(key, "big", signed=True) & STATE_KEY:  # pack_long's inverse
            yield key
            yield value


def _run_partition(uid: str, setup: tuple, wave: int, level: int, p: int,
                   records: list[tuple], now: float | None = None) -> list[tuple[int, tuple]]:
    """This task's step of the wave: what it sends on (its State first, kept in its partition)."""
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
        kind = type(rec)
        if kind is Inputs:
            inputs.extend(rec.batches)
        elif kind is Forward:
            if rec.level == level:
                inputs.extend(rec.batches)
            else:
                onward.setdefault((rec.level, rec.partition), []).extend(rec.batches)
        elif kind is State:
            state = rec
        elif kind is Acks:
            roots.append(rec.roots)
            vals.append(rec.xors)
        else:
            other.append(rec)
    if inputs or state is None:
        task = _task_for(uid, setup, level, p, state)
        res = task.run([pickle.loads(b) for b in inputs], wave, now)
        for target, blob in seal_outputs(res, to_bytes=True):  # each batch pickled once, here
            onward.setdefault(layout.loc[target], []).append(blob)
        roots.extend(res.ack_roots)
        vals.extend(res.ack_vals)
        other.extend(_reliability_records(wave, res))
        state_from = state.wave if state is not None else 0
        state = State(wave, *task.snapshot(cloudpickle.dumps, wave))
        # always, even with nothing executed: the driver follows each task's State from step to step
        captured = portable_captured(res.captured) if res.captured else res.captured
        other.append(Report(wave, res.component, res.task, res.counters, res.errors, captured, res.metrics,
                            state.size, state_from, state.fixed.token if state.fixed is not None else 0))
        _TASKS[(uid, task.component, task.task_index)] = (wave, task)
    out: list[tuple[int, tuple]] = [(p, state)]  # stays in this partition: next wave's state for this task
    for (dest_level, dest_p), batches in onward.items():
        if dest_level == level + 1:
            out.append((dest_p, Inputs(wave, batches)))
        else:  # a later level: through the next level's partitions, level by level
            out.append((dest_p % nxt, Forward(wave, dest_level, dest_p, batches)))
    # Acks and reports travel on with the data, to the next level, then to the ackers.
    to = p % nxt if nxt else p
    if roots:
        r, v = combine(np.concatenate(roots), np.concatenate(vals))  # fold per root before the shuffle
        out.append((to, Acks(wave, r, v)))
    out.extend((to, rec) for rec in other)
    return out


def _reliability_records(wave: int, res: TaskResult) -> list[tuple]:
    """A task's failures, and the batches it sent with no edges and settled, as records."""
    out: list[tuple] = []
    if res.fail_roots:
        out.append(Fails(wave, res.fail_roots, res.fail_reasons))
    if res.sent or res.settled:
        out.append(Settles(wave, res.sent, res.settled))
    return out


def to_driver(it: Iterable[bytes]) -> Iterator[tuple]:
    """With one acker, the last level's acks (folded per partition), failures and reports go
    straight to the driver, which folds them across partitions: no acker stage."""
    return (rec for _, rec in records_of(it) if type(rec) is not State)


def to_ackers(ackers: int) -> Any:
    k = _U64(ackers)

    def route(it: Iterable[bytes]) -> Iterator[tuple[int, tuple]]:
        for _, rec in records_of(it):  # a State is none of these kinds: it stays behind
            kind = type(rec)
            if kind is Acks:
                if ackers == 1:
                    yield 0, rec
                    continue
                part = rec.roots % k
                for a in range(ackers):
                    m = part == a
                    if m.any():
                        yield a, Acks(rec.wave, rec.roots[m], rec.xors[m])
            elif kind is Fails or kind is Report or kind is Settles:
                yield 0, rec

    return route


def acker_reduce(it: Iterable[tuple[int, tuple]]) -> Iterator[tuple]:
    """One acker partition: fold every ack message per root; one row per root goes to the driver."""
    roots, vals, other, wave = [], [], [], 0
    for _, rec in it:
        wave = rec.wave
        if type(rec) is Acks:
            roots.append(rec.roots)
            vals.append(rec.xors)
        else:
            other.append(rec)
    if roots:
        r, v = combine(np.concatenate(roots), np.concatenate(vals))
        yield Acks(wave, r, v)
    yield from other
