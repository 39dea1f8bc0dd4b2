"""One spout task with its side of reliability, wherever it runs (the local engine's coordinator,
a slot on an executor, or the driver for a driver-bound spout): its root ids, its pending trees
(root -> msg id, emit time), its pulls for a wave, and the verdicts it applies (`ack`/`fail`).

What it did since it was last asked is kept as `SpoutFigures` (counts, latencies as histogram
buckets, failure kinds, errors): the local coordinator folds them into its stats after each wave,
a slot sends them in its report, so both engines count the same way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from squall.api.config import Config
from squall.engine.gc_tuning import gc_paused
from squall.engine.tasks.spout_task import SpoutTask
from squall.observe.errors import ErrorRecord
from squall.observe.stats import latency_counts
from squall.reliability.batch import TupleBatch
from squall.reliability.ids import RootIdGenerator
from squall.reliability.pending import FailReason, PendingTrees

_EMPTY_U = np.zeros(0, np.uint64)
_EMPTY_I = np.zeros(0, np.int64)


@dataclass
class SpoutFigures:
    """What one spout task did since the figures were last taken."""

    emitted: int = 0
    transferred: int = 0
    acked: int = 0
    failed: int = 0
    complete_secs: float = 0.0  # summed over the acked trees
    lat_bins: np.ndarray = field(default_factory=lambda: _EMPTY_I)  # their latencies' buckets (observe.stats)
    lat_counts: np.ndarray = field(default_factory=lambda: _EMPTY_I)
    fail_kinds: list[str] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    captured: dict | None = None
    metrics: dict | None = None

    def add_latencies(self, secs: np.ndarray) -> None:
        bins, counts = latency_counts(secs)
        if len(self.lat_bins):
            bins, counts = np.concatenate([self.lat_bins, bins]), np.concatenate([self.lat_counts, counts])
        self.lat_bins, self.lat_counts = bins, counts
        self.complete_secs += float(np.sum(secs))

    @property
    def empty(self) -> bool:
        return not (self.emitted or self.transferred or self.acked or self.failed or self.errors or self.captured
                    or self.metrics)


class Pulled(NamedTuple):
    """A spout task's part of a wave: its output batches and the trees they start."""

    outputs: list[tuple[int, TupleBatch]]
    roots: np.ndarray
    init_vals: np.ndarray
    msg_ids: list
    values: Sequence  # per root, its values (what a dead letter says)
    emitted: int
    full: bool  # it emitted its whole budget (it had more): the wave sizer grows on it
    capped: bool  # max spout pending cut its budget, and it emitted all that was left (none left: held up, not capped)


class Picked(Sequence):
    """Some entries of a sequence (a kept wave's values, for the roots of a part of it)."""

    def __init__(self, of: Sequence, where: list[int]):
        self._of, self._where = of, where

    def __len__(self) -> int:
        return len(self._where)

    def __getitem__(self, i: int) -> Any:  # type: ignore[override]
        return self._of[self._where[i]]


def pick(got: Pulled, roots: np.ndarray) -> Pulled:
    """A kept wave's part for only `roots` of it (a lost wave run again in halves)."""
    from squall.reliability.batch import select_roots  # noqa: PLC0415

    keep = np.isin(got.roots, roots)
    where = np.flatnonzero(keep).tolist()
    outputs = [(t, b2) for t, b in got.outputs if (b2 := select_roots(b, roots, False)) is not None]
    return got._replace(outputs=outputs, roots=got.roots[keep], init_vals=got.init_vals[keep],
                        msg_ids=[got.msg_ids[i] for i in where], values=Picked(got.values, where))


def take_kept(kept: dict[int, dict[int, Pulled]], wave: int, tid: int, roots: np.ndarray | None) -> Pulled | None:
    """What spout task `tid` sent in kept wave `wave` (only `roots` of it, when given), taken out
    of `kept` (wave -> task -> what it sent): the wave that runs it now keeps it under its own number."""
    per = kept.get(wave, {})
    got = per.pop(tid, None)
    if got is not None and roots is not None:
        rest = pick(got, got.roots[~np.isin(got.roots, roots)])
        got = pick(got, roots)
        if len(rest.roots):
            per[tid] = rest
    if not per:
        kept.pop(wave, None)
    return got


class SpoutRunner:
    """One spout task, its root ids and pending trees, and its figures since last taken."""

    def __init__(self, task: SpoutTask, conf: dict, tracking: bool):
        self.task = task
        self.tracking = tracking
        self.root_ids = RootIdGenerator(conf.get(Config.SQUALL_ROOT_SEED), task.task_id)
        self.pending = PendingTrees()
        self.max_pending = conf.get(Config.TOPOLOGY_MAX_SPOUT_PENDING)
        self.wave_secs = float(conf[Config.SQUALL_WAVE_MAX_SECS])
        self.gc_tune = conf.get(Config.SQUALL_GC_TUNE, True)
        self.figures = SpoutFigures()
        self.lost_attempts: dict[Any, int] = {}  # replay key -> lost waves its tuple was in (squall.max.replays)

    @property
    def task_id(self) -> int:
        return self.task.task_id

    @property
    def component(self) -> str:
        return self.task.component

    @property
    def spout(self) -> Any:
        return self.task.spout

    def snapshot(self, dumps: Any) -> bytes:
        """The task and its pending trees and root counter, as a snapshot holds them."""
        return dumps((self.task.snapshot(dumps), self.pending, self.root_ids._next))

    @classmethod
    def restore(cls, task: SpoutTask, conf: dict, tracking: bool, blob: bytes, loads: Any) -> SpoutRunner:
        """A runner for `task` (restored from the first part of `blob`) with its pending trees back."""
        runner = cls(task, conf, tracking)
        _, runner.pending, runner.root_ids._next = loads(blob)
        return runner

    @staticmethod
    def task_blob(blob: bytes, loads: Any) -> bytes:
        """The spout task's own part of a runner's snapshot."""
        return loads(blob)[0]

    def take_figures(self) -> SpoutFigures:
        """The figures since the last call, with the errors the spout reported outside a wave and
        its user metrics."""
        f, self.figures = self.figures, SpoutFigures()
        f.errors.extend(self.task.take_late_errors())
        f.metrics = self.task.context.metrics.take() or None
        return f

    # -- a wave's pulls -------------------------------------------------------------------

    def budget(self, budget: int) -> int:
        """The wave's budget, cut to what max spout pending leaves."""
        if self.tracking and self.max_pending:
            return min(budget, int(self.max_pending) - len(self.pending))
        return budget

    def pull(self, budget: int, now: float) -> Pulled:
        """Call next_tuple until `budget` emits (or what max spout pending leaves), the spout has
        nothing, or its time for the wave is up; turn the emits into batches and trees."""
        st = self.task
        res = st.begin()
        allowed = self.budget(budget)
        # No collection while the pulls' emits are made and turned into batches: what `end` drops
        # (each emit's record) is freed before the collector runs again, instead of being scanned
        # by the first collection after the pulls
        with gc_paused(self.gc_tune):
            if allowed > 0:
                _pull(st, res, allowed, time.perf_counter() + self.wave_secs)
            res, msg_ids, roots, vals, rejected = st.end(self.root_ids.take, self.tracking)
        f = self.figures
        f.emitted += res.emitted
        f.transferred += res.transferred
        f.errors.extend(res.errors)
        if res.captured:
            cap = f.captured if f.captured is not None else {}
            for stream, rows in res.captured.items():
                cap.setdefault(stream, []).extend(rows)
            f.captured = cap
        if self.tracking:
            if len(roots):
                self.pending.add(st.task_id, roots, msg_ids, now)
        elif msg_ids:  # no ackers: at-most-once, acked as soon as emitted (ack_batch once, or ack each)
            f.acked += len(msg_ids)  # counted, as Storm's spout stats count them
            f.errors.extend(st.ack(msg_ids))
        for m, reason in rejected:  # values that cannot reach a bolt: failed at once, never sent
            self._fail(m, reason)
        full = res.emitted >= budget
        capped = 0 < allowed < budget and res.emitted >= allowed
        return Pulled(res.outputs, roots if self.tracking else _EMPTY_U, vals if self.tracking else _EMPTY_U,
                      msg_ids, st.last_values, res.emitted, full, capped)

    # -- verdicts ---------------------------------------------------------------------------

    def apply(self, completed: np.ndarray, failed: np.ndarray, reasons: dict[int, FailReason] | None,
              now: float, default: FailReason | None = None) -> tuple[list, int]:
        """Trees of this task that completed (`ack`) and failed (`fail`, with the reason of each
        root in `reasons`, else `default`, else "failed"). Roots no longer pending (late,
        duplicate, or timed out before) are ignored. Returns the acked msg ids and the fail count."""
        acked: list = []
        nfailed = 0
        if len(completed):
            popped = self.pending.pop_many(completed).get(self.task_id)
            if popped is not None:
                acked = popped.msg_ids
                if self.lost_attempts:  # a tuple lost before completed: its count starts over
                    for m in acked:
                        self.lost_attempts.pop(self.replay_key(m), None)
                self.figures.acked += len(acked)
                self.figures.add_latencies(now - popped.times)
                self.figures.errors.extend(self.task.ack(acked))
        if len(failed):
            popped = self.pending.pop_many(failed).get(self.task_id)
            if popped is not None:
                reasons = reasons or {}
                why = default or FailReason("failed")
                for r, m in zip(popped.roots.tolist(), popped.msg_ids):
                    self._fail(m, reasons.get(r, why))
                nfailed = len(popped.msg_ids)
        return acked, nfailed

    # -- lost waves (squall.engine.driver.lost_waves has the local engine's policy) ---------------

    def replay_key(self, msg_id: Any) -> Any:
        """What stays the same when the spout replays this tuple (Spout.replay_key), as a dict key."""
        hook = getattr(self.spout, "replay_key", None)
        key = hook(msg_id) if hook is not None else msg_id
        try:
            hash(key)
            return key
        except TypeError:
            return repr(key)

    def suspects(self, msg_ids: list) -> np.ndarray:
        """Which of these tuples were in a lost wave before."""
        if not self.lost_attempts:
            return np.zeros(len(msg_ids), bool)
        return np.fromiter((self.replay_key(m) in self.lost_attempts for m in msg_ids), bool, len(msg_ids))

    def lose(self, got: Pulled, error: str, max_replays: int, topology: str) -> list[dict]:
        """A lost wave's tuples of this task: each fails (reason "lost") to be replayed, or, in its
        `max_replays`-th lost wave, is dead-lettered and acked; the dead letters' records."""
        letters: list[dict] = []
        why = FailReason("lost", error=error)
        fail: list[int] = []
        for i, (r, m) in enumerate(zip(got.roots.tolist(), got.msg_ids)):
            key = self.replay_key(m)
            n = self.lost_attempts[key] = self.lost_attempts.get(key, 0) + 1
            if n < max_replays:
                fail.append(r)
                continue
            values = got.values[i]
            if hasattr(values, "as_list"):  # a row of a column emit, made a list only now
                values = values.as_list()
            letters.append({"topology": topology, "component": self.component, "task": self.task_id, "msg_id": m,
                            "values": values, "attempts": n, "error": error})
            del self.lost_attempts[key]
            self.forget(np.array([r], np.uint64))
            self.ack_one(m)
        if fail:
            self.apply(_EMPTY_U, np.array(fail, np.uint64), None, 0.0, why)
        return letters

    def forget(self, roots: np.ndarray) -> dict:
        """Take roots out of the pending map without a verdict (a dead letter is acked apart)."""
        return self.pending.pop_many(roots)

    def ack_one(self, msg_id: Any) -> None:
        self.figures.errors.extend(self.task.ack([msg_id]))

    def _fail(self, msg_id: Any, reason: FailReason) -> None:
        f = self.figures
        f.failed += 1
        f.fail_kinds.append(reason.kind)
        f.errors.extend(self.task.fail(msg_id, reason))


def _pull(st: SpoutTask, res: Any, budget: int, deadline: float) -> None:
    """Call next_tuple until the wave's budget is emitted, the spout has nothing, or time is up."""
    next_tuple = st.spout.next_tuple
    coll = st.collector
    count = coll.recorded_count
    while count < budget:  # the count read once a call, not once per check
        try:
            next_tuple()
        except Exception as e:  # noqa: BLE001 - a spout error is reported, the topology goes on
            res.errors.append(ErrorRecord.from_exception(st.component, st.task_id, e, kind="error"))
            break
        after = coll.recorded_count
        if after == count or time.perf_counter() > deadline:
            break
        count = after
