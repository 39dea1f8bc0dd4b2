"""The spout side of reliability: which msg id each pending root stands for, and since when."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


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
    """The roots one spout task started in one call: consecutive ids, one task, one emit time."""

    __slots__ = ("start", "task", "time", "msg_ids", "live", "left")

    def __init__(self, start: int, task: int, time: float, msg_ids: list):
        self.start = start
        self.task = task
        self.time = time
        self.msg_ids = np.empty(len(msg_ids), dtype=object)
        self.msg_ids[:] = msg_ids
        self.live = np.ones(len(msg_ids), dtype=bool)
        self.left = len(msg_ids)


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
        return cls(np.concatenate([p[0] for p in parts]), [m for p in parts for m in p[1]],
                   np.concatenate([np.full(len(p[0]), p[2]) for p in parts]))


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
        """Remove the given roots that are pending; per spout task, their roots, msg ids and
        emit times (arrays and a list: a wave's acks are settled without a Python step per root)."""
        parts: dict[int, list[tuple[np.ndarray, list, float]]] = {}
        if not len(roots) or not len(self._starts):
            return {}
        roots = np.asarray(roots, np.uint64)
        where = np.searchsorted(self._starts, roots, side="right") - 1
        ok = where >= 0
        for b in np.unique(where[ok]).tolist():
            block = self._blocks[int(self._starts[b])]
            rs = roots[ok & (where == b)]
            off = (rs - np.uint64(block.start)).astype(np.int64)
            inside = off < len(block.live)
            off, rs = off[inside], rs[inside]
            alive = block.live[off]
            off, rs = off[alive], rs[alive]
            if not len(off):
                continue
            block.live[off] = False
            got = block.msg_ids[off].tolist()
            block.msg_ids[off] = None
            block.left -= len(off)
            self._per_task[block.task] -= len(off)
            parts.setdefault(block.task, []).append((rs, got, block.time))
            if block.left == 0:
                del self._blocks[block.start]
        if len(self._blocks) != len(self._starts):
            self._starts = np.array(sorted(self._blocks), np.uint64)
        return {task: Popped.of(ps) for task, ps in parts.items()}
