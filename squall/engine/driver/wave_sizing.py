"""How many spout tuples a wave takes, from what waves measurably cost.

A wave costs about `a + b * n` seconds for `n` spout tuples: `a` is what every wave pays
whatever its size (on Spark: scheduling a job and its stages, starting Python tasks, moving the
bolt state), `b` what each spout tuple and its tuple tree cost. Small
waves give low latency and waste cores on `a`; big waves amortize `a` and hold tuples longer.

The sizer fits `a` and `b` to the waves it has seen and, when the spouts can fill a wave (heavy
load), sizes it so `a` is at most OVERHEAD_SHARE of the wave (n = a (1 - s) / (s b)), but never
longer than the target time (a quarter of the message timeout at most). Under a light load a wave
takes only what the spouts have, so this budget does not matter and latency stays low.
Observations are kept per size band (half an octave), each a moving average, so the fit keeps
the spread of sizes it needs while the budget settles. `a` found by extrapolating from big waves
alone is too noisy (a little noise in wave times moves the budget a lot), so under a steady heavy load
every PROBE_EVERY-th wave is a small probe (1/PROBE_FRACTION of the budget) that pins it; at the
floor (a budget near MIN_TUPLES) the probe is PROBE_FRACTION times bigger instead. Without that a
fit that once found `a` ~ 0 would keep every wave at MIN_TUPLES for good, well below what bigger
waves give even where the fixed cost is small (the local engine).
With `group` waves in flight, waves end unevenly (one waits for its job, the next finds its job
done), so the sizer learns from the mean of `group` consecutive waves of one kind, and a probe is
`group` consecutive small waves: a probe averaged with a full wave would look like two middling
waves, and the fit would lose its small sizes.
The share is a tenth, not a fifth: a fifth settles word count on Spark at waves well below those
it runs fastest at (its throughput still grows with much bigger waves); a light load's waves
are not full, so their latency is not what this share decides.
An executor may set a floor on a full wave's time (`min_wave_secs`: the fitted b is reliable
where a small a is not, so the floor sizes by b alone): the Spark engine's small waves cost more
than their a says (squall.engine.resident.driver).
The first waves (Python workers starting, first imports: several times slower than later ones
of the same size) are not observed, and a band not seen for STALE_WAVES waves is
left out of the fit, so one slow moment does not size waves for long.
"""

from __future__ import annotations

import math

import numpy as np

OVERHEAD_SHARE = 0.1  # the fixed cost of a wave, at most this share of a full wave
GROWTH = 1.5  # while a and b cannot be told apart yet: full waves grow by this much
SMOOTHING = 0.3  # weight of a new observation in its band's moving average
MIN_TUPLES = 64
PROBE_EVERY = 16  # groups of full waves between two groups of small probe waves
PROBE_FRACTION = 8
WARMUP_WAVES = 3
STALE_WAVES = 48


class WaveSizer:
    """The spout-tuple budget of the next wave."""

    def __init__(self, start: int, cap: int, target_secs: float, group: int = 1, min_secs: float = 0.0):
        self.cap = max(MIN_TUPLES, int(cap))
        self.min_secs = min(min_secs, target_secs)  # a full wave lasts at least this (the executor's floor)
        self.budget = min(max(MIN_TUPLES, int(start)), self.cap)
        self.target_secs = target_secs
        self.bands: dict[int, list[float]] = {}  # band -> [mean n, mean secs, wave last seen]
        self.waves = 0
        self.fixed_secs: float | None = None  # the fitted a
        self.per_tuple_secs: float | None = None  # the fitted b
        self.group = max(1, int(group))
        self._since_probe = PROBE_EVERY - 2  # the first probe comes early
        self._probes_left = 0  # probe waves still to build in this group
        self._seen: list[tuple[int, float, bool]] = []  # the group observed so far: (n, secs, full)
        self._seen_probe = False  # ... and its kind

    def wave_budget(self) -> tuple[int, bool]:
        """The budget of the next wave, and whether it is a probe: `budget`, or now and then
        `group` small probe waves."""
        if self._probes_left == 0 and self._since_probe < PROBE_EVERY:
            return self.budget, False
        if self._probes_left == 0:
            self._probes_left, self._since_probe = self.group, 0
        self._probes_left -= 1
        if self.budget // PROBE_FRACTION >= MIN_TUPLES:
            return self.budget // PROBE_FRACTION, True
        # Near the floor a smaller probe would land in the budget's own band and the fit would
        # keep a single size: probe upwards, or a fit that once found `a` ~ 0 stays there.
        return min(self.cap, self.budget * PROBE_FRACTION), True

    def observe(self, n: int, secs: float, full: bool, probe: bool = False) -> None:
        """A wave of `n` spout tuples took `secs` (waves observed in the order they were built);
        a `full` wave (a spout had more than its budget) may move the budget, and `probe` says
        the wave had a probe's budget."""
        if probe != self._seen_probe:  # a group of another kind cut short: its waves ended unevenly
            self._seen, self._seen_probe = [], probe
        self._seen.append((n, secs, full))
        if len(self._seen) < self.group:
            return
        ns, ss, fulls = zip(*self._seen)
        self._seen = []
        self._learn(round(sum(ns) / len(ns)), sum(ss) / len(ss), all(fulls), probe)

    def skip(self) -> None:
        """A wave that cannot be observed (it ended with others): the group so far is not consecutive."""
        self._seen = []

    def _learn(self, n: int, secs: float, full: bool, probe: bool) -> None:
        self.waves += 1
        if full and not probe:
            self._since_probe += 1
        if n <= 0 or secs <= 0 or self.waves <= WARMUP_WAVES:
            return
        band = round(2 * math.log2(n))
        got = self.bands.get(band)
        if got is None:
            self.bands[band] = [float(n), secs, self.waves]
        else:
            got[0] += SMOOTHING * (n - got[0])
            got[1] += SMOOTHING * (secs - got[1])
            got[2] = self.waves
        for old in [k for k, v in self.bands.items() if self.waves - v[2] > STALE_WAVES]:
            del self.bands[old]
        self._fit()
        if full and not probe:
            self.budget = self._next_budget(secs)

    def _fit(self) -> None:
        if len(self.bands) < 2:
            return
        n, t, _ = np.array(list(self.bands.values())).T
        b, a = np.polyfit(n, t, 1)
        if b > 0:
            self.fixed_secs, self.per_tuple_secs = max(float(a), 0.0), float(b)

    def _next_budget(self, secs: float) -> int:
        a, b = self.fixed_secs, self.per_tuple_secs
        if b is None or a is None:  # not fitted yet: explore upwards while waves are short
            want = self.budget * GROWTH if secs < self.target_secs / 2 else self.budget
        else:
            want = min(max(a * (1 - OVERHEAD_SHARE) / (OVERHEAD_SHARE * b), self.min_secs / b),
                       (self.target_secs - a) / b)
            want = self.budget + 0.5 * (want - self.budget)  # half way: one noisy wave moves it little
        return int(min(max(want, MIN_TUPLES), self.cap))
