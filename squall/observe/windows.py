"""Per-task figures over Storm UI's windows (10 min, 3 h, 1 day, all time) in constant memory.

Each window is a ring of time buckets (Storm's rolling windows): a figure is added to the
bucket of "now", and a window's total is the sum of the buckets younger than the window. The
memory is buckets x tasks x fields, whatever the throughput or the uptime.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Storm UI's windows: seconds -> number of buckets (10 min in 30 s steps, 3 h in 5 min, 1 day in 1 h)
WINDOWS: dict[int, int] = {600: 20, 10800: 36, 86400: 24}
ALL_TIME = ":all-time"
WINDOW_NAMES = [str(w) for w in WINDOWS] + [ALL_TIME]

# The figures kept per task; latencies are kept as sums and divided when read.
FIELDS = ("emitted", "transferred", "executed", "acked", "failed", "exec_secs", "proc_secs",
          "complete_secs", "complete_n", "errors")
F = {name: i for i, name in enumerate(FIELDS)}


def parse_window(text: str | None) -> str:
    """The window a query names ('600', '10800', '86400', ':all-time'; default all time)."""
    if text is None or text == "" or text == ALL_TIME:
        return ALL_TIME
    if text in WINDOW_NAMES:
        return text
    raise ValueError(f"unknown window {text!r}: use one of {', '.join(WINDOW_NAMES)}")


class _Ring:
    """One window: `n` buckets of `secs / n` seconds each, per task and field."""

    def __init__(self, secs: int, n: int, tasks: int):
        self.secs = secs
        self.step = secs / n
        self.sums = np.zeros((n, tasks, len(FIELDS)), np.float64)
        self.slot = np.full(n, -1, np.int64)  # which time step each bucket holds now

    def add(self, now: float, rows: np.ndarray, values: np.ndarray) -> None:
        step = int(now // self.step)
        b = step % len(self.slot)
        if self.slot[b] != step:  # a bucket from an older lap: start it afresh
            self.sums[b] = 0.0
            self.slot[b] = step
        np.add.at(self.sums[b], rows, values)

    def total(self, now: float) -> np.ndarray:
        step = int(now // self.step)
        live = (self.slot > step - len(self.slot)) & (self.slot >= 0)
        return self.sums[live].sum(axis=0)


class WindowedStats:
    """The figures of every task of a topology over every window. Task rows are fixed at start."""

    def __init__(self, task_ids: Sequence[int], start: float):
        self.row = {t: i for i, t in enumerate(task_ids)}
        self.task_ids = list(task_ids)
        self.start = start
        self.rings = {str(secs): _Ring(secs, n, len(task_ids)) for secs, n in WINDOWS.items()}
        self.all_time = np.zeros((len(task_ids), len(FIELDS)), np.float64)

    def add(self, now: float, task: int, **figures: float) -> None:
        """Add figures (FIELDS names) for one task."""
        vec = np.zeros(len(FIELDS), np.float64)
        for k, v in figures.items():
            vec[F[k]] = v
        self.add_rows(now, np.array([self.row[task]]), vec[None, :])

    def add_rows(self, now: float, rows: np.ndarray, values: np.ndarray) -> None:
        """Add a (k, FIELDS) block of figures for task rows `rows` (rows may repeat)."""
        if not len(rows):
            return
        np.add.at(self.all_time, rows, values)
        for ring in self.rings.values():
            ring.add(now, rows, values)

    def totals(self, window: str, now: float) -> np.ndarray:
        """(tasks, FIELDS) sums over `window` (a WINDOW_NAMES entry)."""
        if window == ALL_TIME:
            return self.all_time.copy()
        return self.rings[window].total(now)

    def span(self, window: str, now: float) -> float:
        """The seconds a window covers now: its length, or the uptime if that is shorter."""
        up = max(now - self.start, 1e-9)
        return up if window == ALL_TIME else min(float(window), up)


def figures(sums: np.ndarray, span_secs: float) -> dict[str, float | int | None]:
    """Storm UI's figures from one task's (or a component's summed) FIELDS vector.

    executeLatency: ms in execute per executed tuple. processLatency: ms per executed tuple in
    the task, execute plus squall's anchoring and ack bookkeeping (the time until its ack is
    recorded). capacity: the share of the window the task spent executing (Storm's
    executed x executeLatency / window), so near 1 means the task is the bottleneck.
    completeLatency: ms from spout emit to the tree's ack, averaged over acked trees."""
    ex, n = float(sums[F["executed"]]), float(sums[F["complete_n"]])
    return {
        "emitted": int(sums[F["emitted"]]),
        "transferred": int(sums[F["transferred"]]),
        "executed": int(ex),
        "acked": int(sums[F["acked"]]),
        "failed": int(sums[F["failed"]]),
        "errors": int(sums[F["errors"]]),
        "executeLatency": _ms(sums[F["exec_secs"]], ex),
        "processLatency": _ms(sums[F["proc_secs"]], ex),
        "capacity": round(float(sums[F["exec_secs"]]) / span_secs, 4) if span_secs > 0 else 0.0,
        "completeLatency": _ms(sums[F["complete_secs"]], n),
    }


def _ms(secs: float, count: float) -> float | None:
    return 1000.0 * float(secs) / count if count else None
