"""Groupings as functions: values -> target task ids, identical in every engine and process.

Fields grouping hashes with CRC-32 of a canonical encoding, never Python's `hash()` (salted per
process for str), so the same tuple goes to the same task on every machine.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

from squall.api.topology import Grouping, StormTopology

Route = Callable[[Sequence[Any]], list[int]]
Pick = Callable[[Sequence[Any]], int]  # values -> the position of the one target task in `route.tasks`
ROUTE_CACHE_SIZE = 1 << 18
# A fields grouping's position for a str value depends on the value and the number of target
# tasks alone, so one cache per target count serves every route of a process and outlives the
# task instances: on Spark a task's instance is rebuilt from its State on most waves (another
# Python worker ran its last step), and a cache per route started empty each time, hashing each
# distinct word of the wave again.
_PICK_CACHES: dict[int, dict[str, int]] = {}


def stable_hash(value: Any) -> int:
    """A process-independent 32-bit hash of a field value."""
    if isinstance(value, str):
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return zlib.crc32(value)
    if value is None or isinstance(value, (bool, int, float)):
        return zlib.crc32(repr(value).encode())
    if isinstance(value, (tuple, list)):
        h = 0x345678
        for v in value:
            h = zlib.crc32(stable_hash(v).to_bytes(4, "little"), h)
        return h
    return zlib.crc32(repr(value).encode("utf-8", "surrogatepass"))


def fields_hash(values: Sequence[Any], idx: Sequence[int]) -> int:
    if len(idx) == 1:
        return stable_hash(values[idx[0]])
    h = 0
    for i in idx:
        h = zlib.crc32(stable_hash(values[i]).to_bytes(4, "little"), h)
    return h


class ShuffleCounter:
    """Round robin over the target tasks, starting where the producer's index points."""

    __slots__ = ("tasks", "i")

    def __init__(self, tasks: list[int], start: int):
        self.tasks = tasks
        self.i = start % len(tasks)

    def __call__(self, values: Sequence[Any]) -> list[int]:
        i = self.i
        self.i = (i + 1) % len(self.tasks)
        return [self.tasks[i]]

    def pick(self, values: Sequence[Any]) -> int:
        """The next target's position (the same sequence as calling the counter)."""
        i = self.i
        self.i = (i + 1) % len(self.tasks)
        return i


def _one_target(route: Route, tasks: list[int], pick: Pick) -> Route:
    """Give a route that always sends to exactly one task its `pick` (the position of that task
    in `tasks`): what the lean emit path (squall.api.collectors) records instead of a list."""
    route.pick = pick  # type: ignore[attr-defined]
    route.tasks = tasks  # type: ignore[attr-defined]
    return route


def make_route(grouping: Grouping, target_tasks: list[int], field_names: Sequence[str],
               producer_index: int) -> Route | None:
    """The route of one subscription; None for direct grouping (the emitter names the task)."""
    kind = grouping.kind
    n = len(target_tasks)
    if kind in ("shuffle", "none"):
        return ShuffleCounter(target_tasks, producer_index)
    if kind == "local_or_shuffle":
        if producer_index < n:
            same = [target_tasks[producer_index]]
            return _one_target(lambda values: list(same), target_tasks, lambda values: producer_index)
        return ShuffleCounter(target_tasks, producer_index)
    if kind == "global":
        low = [target_tasks[0]]
        return _one_target(lambda values: list(low), target_tasks, lambda values: 0)
    if kind == "all":
        return lambda values: list(target_tasks)
    if kind == "fields":
        idx = [list(field_names).index(f) for f in grouping.fields]
        if len(idx) == 1:
            i0 = idx[0]

            cache = _PICK_CACHES.setdefault(n, {})  # field values repeat (words, keys): hash each once

            def pick_one(values: Sequence[Any]) -> int:
                v = values[i0]
                if type(v) is str:
                    p = cache.get(v)
                    if p is None:
                        p = zlib.crc32(v.encode("utf-8", "surrogatepass")) % n
                        if len(cache) < ROUTE_CACHE_SIZE:
                            cache[v] = p
                    return p
                return stable_hash(v) % n

            def route_one(values: Sequence[Any]) -> list[int]:
                return [target_tasks[pick_one(values)]]

            route_one.cache, route_one.index = cache, i0  # type: ignore[attr-defined] # read by emit inline
            return _one_target(route_one, target_tasks, pick_one)
        return _one_target(lambda values: [target_tasks[fields_hash(values, idx) % n]], target_tasks,
                           lambda values: fields_hash(values, idx) % n)
    if kind == "direct":
        return None
    raise ValueError(f"unknown grouping {kind!r}")


def stream_routes(topology: StormTopology, component: str, stream: str,
                  producer_index: int) -> list[tuple[str, Route | None]]:
    """(subscriber id, route) for every subscriber of one output stream of a component."""
    fields = topology.fields(component, stream)
    return [
        (sub, make_route(g, topology.task_ids[sub], fields, producer_index))
        for sub, g in topology.subscribers.get((component, stream), [])
    ]
