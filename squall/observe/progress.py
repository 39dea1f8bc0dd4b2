"""The one-line live progress display of `squall run`.

The formatting is pure (`Sample`, `sample_from`, `rate`, `format_line`), so it can be tested on
fake stats; `ProgressLine` reads a running topology's stats and coordinator and renders it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text


@dataclass(frozen=True)
class Sample:
    """A topology's counters at one moment."""

    t: float  # monotonic seconds
    waves: int
    executed: int  # bolt tuples executed, summed over bolts
    acked: int  # spout trees acked
    failed: int  # spout trees failed
    pending: int
    p50_ms: float | None
    p99_ms: float | None
    errors: int


def sample_from(stats: dict[str, dict[str, Any]], waves: int, pending: int, errors: int, t: float) -> Sample:
    """Fold `get_topology_stats` output (plus the coordinator's counters) into a Sample.

    Latency percentiles are over all spouts: the worst p50/p99 of any spout.
    """
    executed = acked = failed = 0
    p50: float | None = None
    p99: float | None = None
    for s in stats.values():
        if s.get("kind") == "spout":
            acked += int(s.get("acked") or 0)
            failed += int(s.get("failed") or 0)
            a, b = s.get("complete_latency_p50_ms"), s.get("complete_latency_p99_ms")
            if a is not None:
                p50 = a if p50 is None else max(p50, a)
            if b is not None:
                p99 = b if p99 is None else max(p99, b)
        else:
            executed += int(s.get("executed") or 0)
    return Sample(t, int(waves), executed, acked, failed, int(pending), p50, p99, int(errors))


def rate(prev: Sample | None, cur: Sample) -> float:
    """Bolt tuples executed per second between two samples (0 without an earlier sample)."""
    if prev is None:
        return 0.0
    dt = cur.t - prev.t
    if dt <= 0:
        return 0.0
    return max(0, cur.executed - prev.executed) / dt


def _count(n: float) -> str:
    """Compact counts: 950, 12.3k, 4.56M (3 significant digits; 999.7k shows as 1M)."""
    n = float(n)
    if abs(n) < 999.5:
        return f"{n:.0f}"
    for div, suffix in ((1e3, "k"), (1e6, "M"), (1e9, "G")):
        v = n / div
        if abs(v) < 999.5:
            return f"{v:.3g}{suffix}"
    return f"{n / 1e12:.3g}T"


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 999.5:
        return f"{v / 1000:.2f}s"
    if v >= 99.95:
        return f"{v:.0f}ms"
    return f"{v:.1f}ms"


def format_line(s: Sample, tuples_per_sec: float, elapsed: float | None = None) -> str:
    """The progress line, e.g.
    `12.0s  waves 1.52k  tuples/s 181k  acked 21.3k  failed 0  pending 4.87k  latency p50 210ms p99 480ms  errors 0`
    """
    parts = []
    if elapsed is not None:
        parts.append(f"{elapsed:5.1f}s")
    parts += [
        f"waves {_count(s.waves)}",
        f"tuples/s {_count(tuples_per_sec)}",
        f"acked {_count(s.acked)}",
        f"failed {_count(s.failed)}",
        f"pending {_count(s.pending)}",
        f"latency p50 {_ms(s.p50_ms)} p99 {_ms(s.p99_ms)}",
        f"errors {_count(s.errors)}",
    ]
    return "  ".join(parts)


def style_line(line: str, s: Sample) -> Text:
    text = Text(line)
    text.highlight_words(["waves", "tuples/s", "acked", "pending", "latency"], style="bold cyan")
    text.highlight_words(["failed"], style="bold yellow" if s.failed else "bold cyan")
    text.highlight_words(["errors"], style="bold red" if s.errors else "bold cyan")
    return text


class ProgressLine:
    """Reads `cluster.get_topology_stats(name)` and `cluster.coordinator(name)`; each `update()`
    takes a sample. tuples/s is measured over a sliding window of `window` seconds, so waves
    that last longer than a refresh (large Spark waves) still show their real rate."""

    def __init__(self, cluster: Any, name: str, clock: Callable[[], float] = time.monotonic,
                 window: float = 5.0):
        self.cluster = cluster
        self.name = name
        self.clock = clock
        self.window = window
        self.start = clock()
        self.samples: deque[Sample] = deque()
        self.last: Sample | None = None
        self.tuples_per_sec = 0.0
        self._coord: Any = None  # the last coordinator seen: a topology killed (from the UI) still has a last line

    def coordinator(self) -> Any:
        try:
            self._coord = self.cluster.coordinator(self.name)
        except KeyError:
            if self._coord is None:
                raise
        return self._coord

    def stats(self) -> dict[str, dict[str, Any]]:
        try:
            return self.cluster.get_topology_stats(self.name)
        except KeyError:
            return self.coordinator().stats_dict()

    def sample(self) -> Sample:
        stats = self.stats()
        coord = self.coordinator()
        return sample_from(stats, coord.waves_done, coord.pending_count, coord.error_count, self.clock())

    def update(self) -> Sample:
        cur = self.sample()
        self.samples.append(cur)
        while len(self.samples) > 2 and cur.t - self.samples[1].t >= self.window:
            self.samples.popleft()
        if len(self.samples) > 1:
            self.tuples_per_sec = rate(self.samples[0], cur)
        self.last = cur
        return cur

    def line(self) -> str:
        if self.last is None:
            self.update()
        return format_line(self.last, self.tuples_per_sec, self.last.t - self.start)

    def render(self) -> Text:
        """Take a sample and return the styled line."""
        self.update()
        return style_line(self.line(), self.last)
