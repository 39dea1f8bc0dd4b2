"""Trident's inner join within a batch (Storm's `TridentTopology.join`): the rows of both input
streams of one batch in this partition (each side is partitioned by its join fields, so equal
keys meet), joined on equal keys. Output: the join fields, then the other fields of the first
stream, then the other fields of the second, as Storm orders them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["JoinSpec", "join_rows"]


@dataclass
class JoinSpec:
    sides: dict[tuple[str, str], int]  # (upstream component, stream) -> 0 (first stream) or 1 (second)
    keys: list[tuple[int, ...]]  # per side: positions of its join fields in its rows
    rest: list[tuple[int, ...]]  # per side: positions of its other fields ("$batch" excluded)

    def side_of(self, component: str, stream: str) -> int:
        return self.sides[(component, stream)]


def join_rows(spec: JoinSpec, batch: Any, tagged: list[tuple[int, list]]) -> list[list]:
    """`tagged`: (side, row) pairs of one batch; returns the joined rows, in arrival order of
    the first stream, then of the second."""
    right: dict[tuple, list[list]] = {}
    for side, row in tagged:
        if side == 1:
            right.setdefault(tuple(row[i] for i in spec.keys[1]), []).append(row)
    out = []
    for side, row in tagged:
        if side != 0:
            continue
        key = tuple(row[i] for i in spec.keys[0])
        mine = [row[i] for i in spec.rest[0]]
        for other in right.get(key, ()):
            out.append([batch, *key, *mine, *(other[i] for i in spec.rest[1])])
    return out
