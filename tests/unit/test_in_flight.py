"""Waves in flight (squall.engine.in_flight) against a scripted executor: waves settle in the
order they were submitted; a wave the spouts did not fill is waited for at once; a lost wave
drops the waves submitted after it, fails its own roots only, and the dropped waves run again,
in order, under new wave numbers. (The real thing on Spark: tests/engines/test_spark_engine.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from squall.engine.in_flight import BuiltWave, InFlight
from squall.engine.lost_waves import LostWaves
from squall.engine.wave import WaveLost, WaveOutput


class Job:
    def __init__(self, log: list, wave: int, lost: bool):
        self.log, self.wave, self.lost = log, wave, lost

    def result(self) -> WaveOutput:
        self.log.append(("result", self.wave))
        if self.lost:
            raise WaveLost(f"wave {self.wave} lost")
        out = WaveOutput()
        out.ack_roots = np.array([self.wave], np.uint64)
        return out

    def drop(self) -> None:
        self.log.append(("drop", self.wave))


class ScriptedExecutor:
    """Submits record themselves; the waves in `lose` are lost (their first job only)."""

    def __init__(self, lose: set[int]):
        self.lose = set(lose)
        self.log: list = []

    def submit_wave(self, outputs, wave, now):
        self.log.append(("submit", wave))
        lost = wave in self.lose
        self.lose.discard(wave)
        return Job(self.log, wave, lost)

    def run_wave(self, outputs, wave, now):
        self.log.append(("run", wave))
        out = WaveOutput()
        out.ack_roots = np.array([wave], np.uint64)
        return out


def make(lose: set[int], depth: int = 2):
    ex = ScriptedExecutor(lose)
    numbers = [0]

    def next_wave() -> int:
        numbers[0] += 1
        return numbers[0]

    lost = LostWaves("t", 5, None, lambda task, m: m, lambda *a: None, lambda errs: None)
    flight = InFlight(ex, depth, lost, lambda outputs: ex.run_wave(outputs, numbers[0], 0.0), next_wave, lambda: 0.0)
    return ex, flight, next_wave


def wave(next_wave, full: bool = True) -> BuiltWave:
    n = next_wave()
    return BuiltWave(n, [(1, object())], np.array([100 + n], np.uint64), np.zeros(1, np.uint64), 10, full)


def test_full_waves_overlap_and_settle_in_order():
    ex, flight, next_wave = make(set())
    settled = []
    for _ in range(4):
        settled += [b.wave for b, _ in flight.run(wave(next_wave))]
    assert settled == [1, 2, 3] and len(flight) == 1
    assert ex.log[:4] == [("submit", 1), ("submit", 2), ("result", 1), ("submit", 3)]
    assert flight.submitted_behind == 3
    settled += [b.wave for b, _ in flight.drain()]
    assert settled == [1, 2, 3, 4]


def test_a_wave_the_spouts_did_not_fill_is_waited_for_at_once():
    ex, flight, next_wave = make(set())
    assert flight.run(wave(next_wave)) == []  # full: left running
    done = flight.run(wave(next_wave, full=False))
    assert [b.wave for b, _ in done] == [1, 2] and len(flight) == 0


def test_a_lost_wave_drops_the_later_ones_and_they_run_again_in_order():
    ex, flight, next_wave = make({2}, depth=3)
    done = []
    for _ in range(4):
        done += flight.run(wave(next_wave))
    by_wave = {b.wave: out for b, out in done}
    # wave 2 lost: its root fails; waves 3 and 4 (built on its state) were dropped and run again
    assert ("drop", 3) in ex.log and ("drop", 4) in ex.log
    assert by_wave[2].fail_roots == [102] and not len(by_wave[2].ack_roots)
    assert [r.kind for r in by_wave[2].fail_reasons] == ["lost"]
    assert by_wave[3].fail_roots == [] and by_wave[4].fail_roots == []
    reruns = [w for kind, w in ex.log if kind == "run"]
    assert reruns == sorted(reruns) and min(reruns) > 4  # new numbers, above every wave submitted
    assert [b.wave for b, _ in done] == [1, 2, 3, 4] and flight.rerun == 2


@pytest.mark.parametrize("bad", [0, -1, "two", 1.5])
def test_a_bad_depth_is_a_clear_error(bad):
    with pytest.raises(ValueError, match=r"squall.waves.in.flight must be a whole number >= 1") as got:
        make(set(), depth=bad)
    assert repr(bad) in str(got.value)


def test_a_depth_given_as_text_or_left_out_is_taken():
    assert make(set(), depth="3")[1].depth == 3 and make(set(), depth=None)[1].depth == 1
