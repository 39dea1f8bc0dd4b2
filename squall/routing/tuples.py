"""Groupings as functions: values -> target task ids, identical in every engine and process.

Fields grouping hashes with CRC-32 of a canonical encoding, never Python's `hash()` (salted per
process for str), so the same tuple goes to the same task on every machine.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

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
    """Round robin over the target tasks, starting where the producer's index points; weighted
    when the engine weighs the targets by how loaded their slots are (`weigh`: Storm's load-aware
    shuffle), so a busy slot's tasks get fewer of the tuples."""

    __slots__ = ("tasks", "i", "cycle", "_cycle_array")

    def __init__(self, tasks: list[int], start: int):
        self.tasks = tasks
        self.cycle: list[int] = list(range(len(tasks)))  # target positions, in the order they are sent to
        self._cycle_array: np.ndarray | None = None
        self.i = start % len(tasks)

    def __call__(self, values: Sequence[Any]) -> list[int]:
        i = self.i
        self.i = (i + 1) % len(self.cycle)
        return [self.tasks[self.cycle[i]]]

    def pick(self, values: Sequence[Any]) -> int:
        """The next target's position (the same sequence as calling the counter)."""
        i = self.i
        self.i = (i + 1) % len(self.cycle)
        return self.cycle[i]

    def positions(self, m: int) -> np.ndarray:
        """The next `m` targets' positions at once (a column batch's rows)."""
        if self._cycle_array is None:
            self._cycle_array = np.asarray(self.cycle, np.int64)
        n = len(self.cycle)
        pos = self._cycle_array[(self.i + np.arange(m)) % n]
        self.i = (self.i + m) % n
        return pos

    def weigh(self, weight: Mapping[int, float] | None) -> None:
        """Send to each target task in proportion to `weight[task]` (missing: 1; None: evenly)."""
        weights = [1.0 if weight is None else weight.get(t, 1.0) for t in self.tasks]
        self.cycle = weighted_cycle(weights)
        self._cycle_array = None
        self.i %= len(self.cycle)


CYCLE_STEPS = 20  # a target of average weight appears this many times a cycle: shares in steps of 5%


def weighted_cycle(weights: Sequence[float]) -> list[int]:
    """Positions 0..k-1, each in proportion to its weight (at least once), spread evenly over the
    cycle (smooth weighted round robin); plain round robin when the weights are equal."""
    k = len(weights)
    if k < 2 or max(weights) == min(weights):
        return list(range(k))
    return list(_smooth_cycle(tuple(max(1, round(CYCLE_STEPS * k * w / sum(weights))) for w in weights)))


@functools.lru_cache(maxsize=256)
def _smooth_cycle(counts: tuple[int, ...]) -> tuple[int, ...]:
    """Target j's c_j turns at the middles of c_j equal parts of the cycle, in order of place (ties
    to the lower j): each target's turns evenly apart, as a smooth weighted round robin spreads them,
    in O(n log n) for a cycle of n, not O(n * targets)."""
    place = np.concatenate([(np.arange(c) + 0.5) / c for c in counts])
    target = np.repeat(np.arange(len(counts)), counts)
    return tuple(target[np.lexsort((target, place))].tolist())


def shuffle_counters(streams: Iterable[Any]) -> list[ShuffleCounter]:
    """The shuffle counters of a task's output streams (`StreamOut`s): what a snapshot carries and
    what load-aware shuffle weighs."""
    return [r for so in streams for _, r in so.routes if isinstance(r, ShuffleCounter)]


def weigh_shuffles(streams: Iterable[Any], weight: Mapping[int, float] | None) -> None:
    """Weigh every shuffle of a task's output streams by target task (`ShuffleCounter.weigh`)."""
    for c in shuffle_counters(streams):
        c.weigh(weight)


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
