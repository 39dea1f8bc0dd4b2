"""The spout side of reliability: which msg id each pending root stands for, and since when."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

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


class SpoutPending:
    """Pending roots of one spout task: root -> (msg id, emit time)."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[int, tuple[Any, float]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def add(self, roots: Iterable[int], msg_ids: Iterable[Any], now: float) -> None:
        items = self._items
        for r, m in zip(roots, msg_ids):
            items[r] = (m, now)

    def pop_many(self, roots: np.ndarray) -> list[tuple[int, Any, float]]:
        """Remove and return (root, msg id, emit time) of the given roots that are pending here."""
        out = []
        pop = self._items.pop
        for r in roots.tolist():
            e = pop(r, None)
            if e is not None:
                out.append((r, e[0], e[1]))
        return out
