"""Per-component counters and latencies, as `cluster.get_topology_stats(name)` returns them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


class LatencyWindow:
    """The most recent latencies (seconds) in a ring buffer, for percentiles without a sort of everything."""

    def __init__(self, size: int = 65536):
        self._buf = np.zeros(size, np.float64)
        self._n = 0  # total ever added

    def add(self, values: np.ndarray) -> None:
        values = np.asarray(values, np.float64)[-len(self._buf):]
        size = len(self._buf)
        start = self._n % size
        end = start + len(values)
        if end <= size:
            self._buf[start:end] = values
        else:
            cut = size - start
            self._buf[start:] = values[:cut]
            self._buf[: end - size] = values[cut:]
        self._n += len(values)

    def percentile(self, q: float) -> float | None:
        n = min(self._n, len(self._buf))
        if n == 0:
            return None
        return float(np.percentile(self._buf[:n], q))


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
