"""Per-component counters and latencies, as `cluster.get_topology_stats(name)` returns them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

_LAT_FLOOR = 1e-6  # seconds: the first bucket's lower edge
_LAT_RATIO = 1.02  # each bucket 2% wider than the one before: a percentile is read within 1%
_LAT_BINS = 1100  # 1 us .. ~3 days
_LOG_RATIO = float(np.log(_LAT_RATIO))


def latency_counts(secs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Latencies (seconds) as (bucket, count) pairs: what a slot sends instead of the latencies."""
    secs = np.asarray(secs, np.float64)
    if not len(secs):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    b = np.log(np.maximum(secs, _LAT_FLOOR) / _LAT_FLOOR) / _LOG_RATIO
    return np.unique(np.minimum(b.astype(np.int64), _LAT_BINS - 1), return_counts=True)


class LatencyWindow:
    """Recent latencies as a histogram of 2%-wide log buckets: percentiles within 1%, and
    mergeable (a slot sends its buckets of a wave, `add_counts`, not every tree's latency). Two
    generations of `size` samples each: the percentiles cover the most recent size .. 2 x size."""

    def __init__(self, size: int = 65536):
        self.size = size
        self._cur = np.zeros(_LAT_BINS, np.int64)
        self._old = np.zeros(_LAT_BINS, np.int64)
        self._n_cur = 0

    def add(self, values: np.ndarray) -> None:
        self.add_counts(*latency_counts(values))

    def add_counts(self, bins: np.ndarray, counts: np.ndarray) -> None:
        if not len(bins):
            return
        np.add.at(self._cur, np.asarray(bins, np.int64), np.asarray(counts, np.int64))
        self._n_cur += int(np.sum(counts))
        if self._n_cur >= self.size:
            self._old, self._cur, self._n_cur = self._cur, np.zeros(_LAT_BINS, np.int64), 0

    def percentile(self, q: float) -> float | None:
        h = self._cur + self._old
        cum = np.cumsum(h)
        n = int(cum[-1])
        if n == 0:
            return None
        k = int(np.searchsorted(cum, q / 100.0 * n, side="left"))
        k = min(k, _LAT_BINS - 1)
        return _LAT_FLOOR * _LAT_RATIO ** (k + 0.5)  # the bucket's geometric middle


@dataclass
class ComponentStats:
    kind: str  # "spout" or "bolt"
    tasks: int
    emitted: int = 0
    executed: int = 0
    acked: int = 0
    failed: int = 0
    errors: int = 0
    exec_secs: float = 0.0
    complete: LatencyWindow = field(default_factory=LatencyWindow)
    complete_sum: float = 0.0

    def add_counters(self, executed: int, acked: int, failed: int, emitted: int, exec_secs: float,
                     transferred: int = 0, proc_secs: float = 0.0) -> None:
        self.executed += executed
        self.acked += acked
        self.failed += failed
        self.emitted += emitted
        self.exec_secs += exec_secs

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kind": self.kind, "tasks": self.tasks, "emitted": self.emitted, "acked": self.acked,
            "failed": self.failed, "errors": self.errors,
        }
        if self.kind == "bolt":
            d["executed"] = self.executed
            d["execute_latency_ms"] = 1000 * self.exec_secs / self.executed if self.executed else None
        else:
            p50, p99 = self.complete.percentile(50), self.complete.percentile(99)
            d["complete_latency_ms"] = 1000 * self.complete_sum / self.acked if self.acked else None
            d["complete_latency_p50_ms"] = None if p50 is None else 1000 * p50
            d["complete_latency_p99_ms"] = None if p99 is None else 1000 * p99
        return d
