"""What the UI shows of one running topology, fed by its coordinator after each wave from what
it already records: per-task figures over the windows, failures by reason, a short history
for the charts and the user metrics. Everything here is bounded: constant memory."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Iterable
from typing import Any

import numpy as np

from squall.observe.user_metrics import MetricsBoard
from squall.observe.windows import FIELDS, F, WindowedStats

HISTORY_POINTS = 300  # chart points kept (with HISTORY_EVERY_SECS: the last 10 minutes)
HISTORY_EVERY_SECS = 2.0


class TopologyWatch:
    """Per-task windowed figures, failure reasons, chart history and user metrics of a topology."""

    def __init__(self, task_ids: Iterable[int], task_component: dict[int, str], now: float | None = None):
        now = time.time() if now is None else now
        self.task_component = dict(task_component)
        self.windows = WindowedStats(list(task_ids), now)
        self.fail_reasons: Counter[str] = Counter()
        self.metrics = MetricsBoard()
        self.history: deque[dict[str, float | None]] = deque(maxlen=HISTORY_POINTS)
        self._last_point = now
        self._since = np.zeros(len(FIELDS), np.float64)  # figures since the last chart point
        self._rows: list[int] = []
        self._vals: list[np.ndarray] = []
        self.lock = threading.Lock()

    # -- fed by the coordinator (its wave thread) -----------------------------------------

    def add(self, task: int, **figures: float) -> None:
        """Figures (FIELDS names) for one task, kept until end_wave adds them in one go."""
        vec = np.zeros(len(FIELDS), np.float64)
        for k, v in figures.items():
            vec[F[k]] = v
        self._rows.append(self.windows.row[task])
        self._vals.append(vec)

    def add_counters(self, tasks: Iterable[tuple[int, Any]]) -> None:
        """The bolt tasks' counters of a wave (engine Counters: executed, acked, failed, emitted,
        exec_secs, transferred, proc_secs)."""
        for task, c in tasks:
            self.add(task, executed=c[0], acked=c[1], failed=c[2], emitted=c[3], exec_secs=c[4],
                     transferred=c[5], proc_secs=c[6])

    def failed(self, task: int, reasons: Iterable[str]) -> None:
        kinds = list(reasons)
        with self.lock:
            self.fail_reasons.update(kinds)
        self.add(task, failed=len(kinds))

    def end_wave(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if self._rows:
            rows, vals = np.array(self._rows), np.vstack(self._vals)
            self._rows, self._vals = [], []
            with self.lock:
                self.windows.add_rows(now, rows, vals)
            self._since += vals.sum(axis=0)
        if now - self._last_point >= HISTORY_EVERY_SECS:
            self._point(now)

    def _point(self, now: float) -> None:
        secs, s = now - self._last_point, self._since
        n = s[F["complete_n"]]
        point = {
            "time": round(now, 3),
            "ackedPerSec": round(float(s[F["acked"]]) / secs, 2),
            "emittedPerSec": round(float(s[F["emitted"]]) / secs, 2),
            "failedPerSec": round(float(s[F["failed"]]) / secs, 2),
            "completeLatency": round(1000.0 * float(s[F["complete_secs"]]) / n, 3) if n else None,
        }
        with self.lock:
            self.history.append(point)
        self._since = np.zeros(len(FIELDS), np.float64)
        self._last_point = now

    # -- read by the UI (another thread) --------------------------------------------------

    def totals(self, window: str, now: float | None = None) -> tuple[np.ndarray, float]:
        """(tasks x FIELDS sums over `window`, the seconds it covers)."""
        now = time.time() if now is None else now
        with self.lock:
            return self.windows.totals(window, now), self.windows.span(window, now)

    def failures_by_reason(self) -> dict[str, int]:
        with self.lock:
            return dict(self.fail_reasons)

    def chart_points(self) -> list[dict[str, float | None]]:
        with self.lock:
            return list(self.history)
