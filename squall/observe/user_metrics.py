"""User metrics summed on the driver: every task's per-wave changes (squall.api.metrics) are
added here, per component and task, across waves; the UI and /metrics read the totals."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class HistogramTotals:
    """A histogram merged over waves (and, when read per component, over tasks)."""

    buckets: tuple[float, ...]
    counts: list[int]
    sum: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    def merge(self, buckets: tuple[float, ...], counts: list[int], total: float) -> None:
        if tuple(buckets) != self.buckets:
            raise ValueError(f"histogram buckets differ between tasks or waves: {self.buckets} vs {tuple(buckets)}")
        self.counts = [a + b for a, b in zip(self.counts, counts)]
        self.sum += total


@dataclass
class TaskTotals:
    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float | None] = field(default_factory=dict)
    histograms: dict[str, HistogramTotals] = field(default_factory=dict)


class MetricsBoard:
    """Totals of every task's user metrics, keyed by (component, task id)."""

    def __init__(self) -> None:
        self.tasks: dict[tuple[str, int], TaskTotals] = {}
        self.lock = threading.Lock()

    def add(self, component: str, task: int, delta: dict | None) -> None:
        """One task's metrics of one wave, as TaskMetrics.take() gave them."""
        if not delta:
            return
        with self.lock:
            tot = self.tasks.setdefault((component, task), TaskTotals())
            for name, n in delta.get("c", {}).items():
                tot.counters[name] = tot.counters.get(name, 0.0) + n
            tot.gauges.update(delta.get("g", {}))
            for name, (buckets, counts, total) in delta.get("h", {}).items():
                h = tot.histograms.get(name)
                if h is None:
                    tot.histograms[name] = HistogramTotals(tuple(buckets), list(counts), total)
                else:
                    h.merge(tuple(buckets), counts, total)

    def by_component(self) -> dict[str, dict[str, Any]]:
        """Per component: counters summed over tasks, gauges summed (and per task), histograms merged."""
        out: dict[str, dict[str, Any]] = {}
        with self.lock:
            items = sorted(self.tasks.items())
            for (comp, task), tot in items:
                c = out.setdefault(comp, {"counters": {}, "gauges": {}, "histograms": {}})
                for name, n in tot.counters.items():
                    c["counters"][name] = c["counters"].get(name, 0.0) + n
                for name, v in tot.gauges.items():
                    g = c["gauges"].setdefault(name, {"sum": 0.0, "tasks": {}})
                    g["tasks"][task] = v
                    if v is not None:
                        g["sum"] += v
                for name, h in tot.histograms.items():
                    m = c["histograms"].get(name)
                    if m is None:
                        c["histograms"][name] = HistogramTotals(h.buckets, list(h.counts), h.sum)
                    else:
                        m.merge(h.buckets, h.counts, h.sum)
        return out

    def of_task(self, component: str, task: int) -> TaskTotals | None:
        with self.lock:
            return self.tasks.get((component, task))
