"""The one rule for waiting between tries of something that keeps failing (a reconnect, a pull):
start short, double on every failure up to a cap, start short again after a success. Every
connector computes its retry pauses here, so they all behave (and can be tuned) alike.
"""

from __future__ import annotations

RECONNECT_MIN_SECS = 0.2
RECONNECT_MAX_SECS = 10.0


class Backoff:
    """Doubling delays, `first`, 2 * `first`, ... up to `cap`; `reset()` after a success."""

    __slots__ = ("cap", "failures", "first", "_next")

    def __init__(self, first: float = RECONNECT_MIN_SECS, cap: float = RECONNECT_MAX_SECS):
        if first <= 0 or cap < first:
            raise ValueError(f"need 0 < first <= cap, got first={first}, cap={cap}")
        self.first = float(first)
        self.cap = float(cap)
        self._next = self.first
        self.failures = 0  # since the last success

    def next(self) -> float:
        """The pause before the next try (after a failure); the one after it is twice as long."""
        self.failures += 1
        delay = self._next
        self._next = min(self.cap, delay * 2)
        return delay

    def reset(self) -> bool:
        """A try succeeded: start short again. True if there had been failures since the last
        success (the caller may count a reconnect)."""
        failed = self.failures > 0
        self._next = self.first
        self.failures = 0
        return failed
