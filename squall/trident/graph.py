"""The graph a TridentTopology records: one node per stream operation. Streams, merges and
joins add nodes; the compiler (squall.trident.compiler) turns the graph into bolts."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Node", "check_fields", "names", "walk"]

_ORDER = itertools.count()


@dataclass(eq=False)
class Node:
    kind: str
    parent: Node | None
    fields: tuple[str, ...]  # "$batch" first
    params: dict[str, Any] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    parallelism: int | None = None
    parents: tuple[Node, ...] = ()  # merge and join: every input stream (parent is the first)
    root: Node | None = None  # the spout node whose batches flow here
    order: int = field(default_factory=lambda: next(_ORDER))  # creation order: Storm's "last added node"

    def __post_init__(self) -> None:
        if self.parent is not None and not self.parents:
            self.parents = (self.parent,)
        if self.root is None:
            self.root = self if self.parent is None else self.parent.root

    def add(self, kind: str, fields: tuple[str, ...], **params: Any) -> Node:
        n = Node(kind, self, fields, params)
        self.children.append(n)
        return n


def names(fields: Any) -> tuple[str, ...]:
    if isinstance(fields, str):
        return (fields,)
    return tuple(fields)


def check_fields(have: tuple[str, ...], want: tuple[str, ...], what: str) -> None:
    missing = [f for f in want if f not in have]
    if missing:
        raise ValueError(f"{what}: unknown field(s) {missing}; the stream has {list(have[1:])}")


def walk(node: Node) -> list[Node]:
    """Every node reachable from `node`, each once (merges and joins have several parents)."""
    out, seen, todo = [], set(), [node]
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        out.append(n)
        todo.extend(reversed(n.children))
    return out
