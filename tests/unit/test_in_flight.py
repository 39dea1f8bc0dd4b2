"""Waves in flight (squall.engine.in_flight) against a scripted executor: waves settle in the
order they were submitted; a wave the spouts did not fill is waited for at once, one max spout
pending cut short is not (also through the coordinator, which tells the two apart); a lost wave
drops the waves submitted after it, fails its own roots only, and the dropped waves run again,
in order, under new wave numbers. (The real thing on Spark: tests/engines/test_spark_engine.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from squall import BasicBolt, Config, TopologyBuilder
from squall.engine.clock import RealClock
from squall.engine.coordinator import Coordinator
from squall.engine.in_flight import BuiltWave, InFlight
from squall.engine.local import LocalExecutor
from squall.engine.lost_waves import LostWaves
from squall.engine.wave import WaveLost, WaveOutput
from squall.testing import AckFailMapTracker, FeederSpout


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


def wave(next_wave, full: bool = True, capped: bool = False) -> BuiltWave:
    n = next_wave()
    return BuiltWave(n, [(1, object())], np.array([100 + n], np.uint64), np.zeros(1, np.uint64), 10, full, capped)


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


def test_a_wave_max_spout_pending_cut_short_stays_in_flight():
    ex, flight, next_wave = make(set())
    assert flight.run(wave(next_wave)) == []
    done = flight.run(wave(next_wave, full=False, capped=True))  # the spouts had more: a heavy load
    assert [b.wave for b, _ in done] == [1] and len(flight) == 1


class DeferredLocal(LocalExecutor):
    """The local engine, with its waves' results taken later (as Spark's jobs are)."""

    def submit_wave(self, outputs, wave, now):
        out = self.run_wave(outputs, wave, now)
        return type("Job", (), {"result": lambda _self: out, "drop": lambda _self: None})()


class Pass(BasicBolt):
    def declare_output_fields(self, d):
        pass

    def execute(self, t, collector):
        pass


def test_the_coordinator_keeps_waves_max_spout_pending_cut_short_in_flight():
    """Waves of 10 at max spout pending 15: every other wave gets 5 (the others' 10 pending).
    Each is submitted behind the one before (waiting for the short ones emptied the pipeline
    every other wave); the last, which the spout could not fill, is waited for at once."""
    feeder, tracker = FeederSpout(["v"]), AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("pass", Pass()).shuffle_grouping("src")
    topology = b.create_topology()
    conf = Config({Config.SQUALL_WAVE_MAX_TUPLES: 10, Config.TOPOLOGY_MAX_SPOUT_PENDING: 15,
                   Config.SQUALL_WAVES_IN_FLIGHT: 2})
    coord = Coordinator("t", topology, conf, DeferredLocal(topology, conf), RealClock())
    coord.start()
    for i in range(57):
        feeder.feed([i], i)
    built = []
    orig_run = coord.in_flight.run
    coord.in_flight.run = lambda w: (built.append((w.emitted, w.full, w.capped)), orig_run(w))[1]
    for _ in range(8):
        coord.run_wave()
    in_flight_after_last = len(coord.in_flight)
    coord.close()
    assert built == [(10, True, False), (5, False, True)] * 3 + [(10, True, False), (2, False, False)]
    assert coord.in_flight.submitted_behind == 7 and in_flight_after_last == 0
    assert sorted(tracker.acked) == list(range(57))


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
