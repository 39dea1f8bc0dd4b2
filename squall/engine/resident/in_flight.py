"""Waves in flight on the Spark engine: how many waves run at once, what each may pull under max
spout pending, and which verdicts a wave's spouts apply before they pull.

`squall.waves.in.flight` (`depth`) waves run at once, so that the slots work on one wave while
another's acks are on their way. Under max spout pending they share it: each wave takes at most
max pending / depth, else a wave that took it all would leave the next nothing to pull until its
acks came, and the two would run one after the other.

Under max spout pending the driver also sends each marker a wave ahead: wave n's marker is out
while waves n-depth..n-1 still run, and its spouts pull once their slot applied the verdicts of
wave n-depth (the room wave n takes), not when the driver heard that wave end and sent the marker
then: no round trip through the driver sits in a wave's chain. Spouts that run in the driver pull
when the driver starts the wave, so a topology with one gains nothing ahead and sends none.
"""

from __future__ import annotations

from typing import Any

from squall.api.config import Config


class WavesInFlight:
    """The driver's waves-in-flight rules for one topology."""

    def __init__(self, conf: dict, tracking: bool, max_pending: Any, driver_spouts: bool) -> None:
        self.depth = waves_in_flight(conf.get(Config.SQUALL_WAVES_IN_FLIGHT))
        self.shared = int(max_pending) if tracking and max_pending and self.depth > 1 else 0
        self.ahead = 1 if self.shared and not driver_spouts else 0

    def left_open(self, full: bool) -> int:
        """Waves run_wave leaves running when it returns: none after a wave that was not full
        (the spouts have no more for now: the next wave starts when they do)."""
        return self.depth - 1 + self.ahead if full else 0

    def budget(self, budget: int) -> int:
        """A wave's budget (spout tuples per spout task) within its share of max pending."""
        return min(budget, max(1, -(-self.shared // self.depth))) if self.shared else budget

    def verdicts_needed(self, n: int, completed_through: int) -> int:
        """The wave whose verdicts wave `n`'s spouts apply, with every one before it, before they pull."""
        return max(completed_through, n - self.depth) if self.ahead else completed_through


def waves_in_flight(value: Any) -> int:
    """`squall.waves.in.flight` as a whole number >= 1 (None: 1), or a clear error."""
    try:
        n = int(1 if value is None else value)
    except (TypeError, ValueError):
        n = 0
    if n < 1 or isinstance(value, float) and value != n:
        raise ValueError(f"{Config.SQUALL_WAVES_IN_FLIGHT} must be a whole number >= 1 (1: one wave at a time), "
                         f"got {value!r}")
    return n
