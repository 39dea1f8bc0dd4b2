"""Time for the coordinator: the real monotonic clock, or one that moves only when told."""

from __future__ import annotations

import time


class RealClock:
    simulated = False

    def now(self) -> float:
        return time.monotonic()


class SimulatedClock:
    simulated = True

    def __init__(self) -> None:
        self._t = 0.0

    def now(self) -> float:
        return self._t

    def advance(self, secs: float) -> None:
        if secs < 0:
            raise ValueError("time only moves forward")
        self._t += secs

    def set(self, t: float) -> None:
        self._t = max(self._t, t)
