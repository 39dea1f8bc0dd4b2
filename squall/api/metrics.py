"""User metrics a task registers on its TopologyContext: counters, gauges and histograms.

They live with the task (on Spark: carried between waves with the bolt instance), and each
wave the engine takes what changed (`TaskMetrics.take`) and sends it with the task's report,
so they are summed across tasks and waves on the driver without any extra Spark job.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

# Prometheus' default histogram buckets (seconds-like values); +Inf is implied.
DEFAULT_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                                      7.5, 10.0)


class CounterMetric:
    """A count that only goes up: `inc(n=1)`."""

    __slots__ = ("name", "_delta")

    def __init__(self, name: str):
        self.name = name
        self._delta = 0.0

    def inc(self, n: float = 1) -> None:
        if n < 0:
            raise ValueError(f"counter {self.name!r}: inc({n}) is negative; a counter only goes up")
        self._delta += n


class HistogramMetric:
    """Observations counted per bucket: `observe(v)`."""

    __slots__ = ("name", "buckets", "_counts", "_sum")

    def __init__(self, name: str, buckets: Sequence[float] = DEFAULT_BUCKETS):
        self.name = name
        self.buckets = tuple(sorted(float(b) for b in buckets))
        self._counts = [0] * (len(self.buckets) + 1)  # the last one: above every bucket (+Inf)
        self._sum = 0.0

    def observe(self, v: float) -> None:
        self._counts[bisect.bisect_left(self.buckets, v)] += 1
        self._sum += v


class TaskMetrics:
    """One task's registered metrics. `take()` gives what changed since the last take."""

    def __init__(self, component: str):
        self.component = component
        self.counters: dict[str, CounterMetric] = {}
        self.gauges: dict[str, Callable[[], Any]] = {}
        self.histograms: dict[str, HistogramMetric] = {}

    def _check(self, name: str, kind: str, taken: dict) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.component}: a {kind} needs a non-empty string name, got {name!r}")
        for other, reg in (("counter", self.counters), ("gauge", self.gauges), ("histogram", self.histograms)):
            if reg is not taken and name in reg:
                raise ValueError(f"{self.component}: metric {name!r} is already registered as a {other}")

    def counter(self, name: str) -> CounterMetric:
        self._check(name, "counter", self.counters)
        return self.counters.setdefault(name, CounterMetric(name))

    def gauge(self, name: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        self._check(name, "gauge", self.gauges)
        if not callable(fn):
            raise TypeError(f"{self.component}: gauge {name!r} needs a function returning a number, got {fn!r}")
        self.gauges[name] = fn
        return fn

    def histogram(self, name: str, buckets: Sequence[float] | None = None) -> HistogramMetric:
        self._check(name, "histogram", self.histograms)
        got = self.histograms.get(name)
        if got is None:
            got = self.histograms[name] = HistogramMetric(name, buckets or DEFAULT_BUCKETS)
        return got

    def take(self) -> dict | None:
        """{"c": {name: delta}, "g": {name: value}, "h": {name: (buckets, counts, sum)}} of what
        changed since the last take (gauges: read now), or None when nothing is registered."""
        if not (self.counters or self.gauges or self.histograms):
            return None
        out: dict[str, dict] = {"c": {}, "g": {}, "h": {}}
        for name, c in self.counters.items():
            out["c"][name], c._delta = c._delta, 0.0
        for name, fn in self.gauges.items():
            out["g"][name] = _read_gauge(fn)
        for name, h in self.histograms.items():
            if any(h._counts):
                out["h"][name] = (h.buckets, h._counts, h._sum)
                h._counts, h._sum = [0] * len(h._counts), 0.0
        return out


def _read_gauge(fn: Callable[[], Any]) -> float | None:
    """A gauge's value now; None (shown as missing) if its function raises or is not a number."""
    try:
        return float(fn())
    except Exception:  # noqa: BLE001 - a broken gauge must not fail the task's wave
        return None
