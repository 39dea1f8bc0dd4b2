"""The spout side of reliability: which msg id each pending root stands for, and since when."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from squall.reliability.batch import run_starts


@dataclass(frozen=True)
class FailReason:
    """Why a tree failed, given to a spout whose `fail` accepts a `reason` keyword.

    kind: "timeout" (no progress within the message timeout), "failed" (a bolt called
    `fail`), "error" (a bolt's execute raised), or "lost" (the wave running it died).
    """

    kind: str
    component: str | None = None
    task: int | None = None
    error: str | None = None

    def __str__(self) -> str:
        where = f" in {self.component}[{self.task}]" if self.component is not None else ""
        err = f": {self.error}" if self.error else ""
        return f"{self.kind}{where}{err}"


TIMEOUT = FailReason("timeout")


class _Block:
    """The roots one spout task started in one call: consecutive ids, one task, one emit time,
    and their msg ids as a list (a whole block acked at once goes to the spout as it is)."""

    __slots__ = ("start", "task", "time", "msg_ids", "live", "left")

    def __init__(self, start: int, task: int, time: float, msg_ids: list):
        self.start = start
        self.task = task
        self.time = time
        self.msg_ids = list(msg_ids)  # its own: entries of done trees are cleared
        self.live = np.ones(len(msg_ids), dtype=bool)
        self.left = len(msg_ids)

    def take(self, rs: np.ndarray) -> tuple[np.ndarray, list]:
        """Take the pending ones of roots `rs` (distinct, all from this block's start on): those
        roots and their msg ids. Every pending root of the block, in order, costs no step per root."""
        off = (rs - np.uint64(self.start)).astype(np.int64)
        n = len(self.live)
        if len(off) == n == self.left and int(off[-1]) == n - 1 and (n == 1 or bool((off[1:] > off[:-1]).all())):
            self.left = 0  # the whole block, in order (0 .. n-1): a wave's trees all acked
            return rs, self.msg_ids
        inside = off < n
        if not inside.all():
            off, rs = off[inside], rs[inside]
        alive = self.live[off]
        if not alive.all():
            off, rs = off[alive], rs[alive]
        self.live[off] = False
        self.left -= len(off)
        ids, where = self.msg_ids, off.tolist()
        got = [ids[i] for i in where]
        for i in where:  # a msg id is not kept once its tree is done (it may be large)
            ids[i] = None
        return rs, got


class Popped(NamedTuple):
    """Trees of one spout task taken out of the pending map: roots, msg ids, emit times."""

    roots: np.ndarray
    msg_ids: list
    times: np.ndarray

    @classmethod
    def of(cls, parts: list[tuple[np.ndarray, list, float]]) -> Popped:
        """From (roots, msg ids, emit time) per block."""
        if len(parts) == 1:
            rs, got, t = parts[0]
            return cls(rs, got, np.full(len(rs), t))
        msg_ids: list = []
        for p in parts:
            msg_ids.extend(p[1])
        return cls(np.concatenate([p[0] for p in parts]), msg_ids,
                   np.repeat(np.array([p[2] for p in parts]), [len(p[0]) for p in parts]))


class PendingTrees:
    """The pending roots of every spout task: root -> (spout task, msg id, emit time).

    Root ids are handed out consecutively, and each spout call takes a run of them; so the
    pending roots are kept as blocks (one per call) of arrays, found by arithmetic and a binary
    search, not as a dict entry and a tuple per root: about 9 bytes per pending tree plus the
    msg id itself, instead of ~200. A block is dropped when its last root is done.
    """

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._starts = np.zeros(0, np.uint64)  # sorted block starts, for searchsorted
        self._per_task: dict[int, int] = {}

    def __len__(self) -> int:
        return sum(self._per_task.values())

    def count(self, task: int) -> int:
        return self._per_task.get(task, 0)

    def add(self, task: int, roots: np.ndarray, msg_ids: list, now: float) -> None:
        """Roots `roots` (consecutive, as RootIdGenerator.take gives them) started by `task`."""
        if not len(roots):
            return
        first = int(roots[0])
        if int(roots[-1]) - first != len(roots) - 1:
            raise ValueError("pending roots of one call must be consecutive ids")
        self._blocks[first] = _Block(first, task, now, msg_ids)
        self._starts = np.append(self._starts, np.uint64(first))
        if len(self._starts) > 1 and self._starts[-1] < self._starts[-2]:
            self._starts.sort()
        self._per_task[task] = self._per_task.get(task, 0) + len(roots)

    def pop_many(self, roots: np.ndarray) -> dict[int, Popped]:
        """Remove the given roots (distinct) that are pending; per spout task, their roots, msg
        ids and emit times (arrays and a list: a wave's acks are settled without a Python step
        per root)."""
        parts: dict[int, list[tuple[np.ndarray, list, float]]] = {}
        if not len(roots) or not len(self._starts):
            return {}
        roots = np.asarray(roots, np.uint64)
        where = np.searchsorted(self._starts, roots, side="right") - 1
        if len(where) > 1 and not bool((roots[1:] > roots[:-1]).all()):  # in order: by block, and in each
            order = np.argsort(roots, kind="stable")  # (several ackers' verdicts come one acker after another)
            roots, where = roots[order], where[order]
        bounds = run_starts(where).tolist() + [len(where)]
        for s, e in zip(bounds[:-1], bounds[1:]):
            b = int(where[s])
            if b < 0:  # before the first pending block
                continue
            block = self._blocks[int(self._starts[b])]
            rs, got = block.take(roots[s:e])
            if not len(got):
                continue
            self._per_task[block.task] -= len(got)
            parts.setdefault(block.task, []).append((rs, got, block.time))
            if block.left == 0:
                del self._blocks[block.start]
        if len(self._blocks) != len(self._starts):
            self._starts = np.array(sorted(self._blocks), np.uint64)
        return {task: Popped.of(ps) for task, ps in parts.items()}
