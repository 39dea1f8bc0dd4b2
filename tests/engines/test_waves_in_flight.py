"""Waves in flight on the Spark engine: under a full load the driver keeps
`squall.waves.in.flight` waves running at once, and max spout pending is shared by them, so a
topology whose waves max pending caps still overlaps them instead of running one at a time; the
markers go out a wave ahead, and the spout never has more than max pending trees open."""

from __future__ import annotations

from collections import Counter

import pytest

from squall import Config, LocalCluster, TopologyBuilder
from tests.support.recovery_topologies import Digits, Numbers

LIMIT, MAX_PENDING = 6000, 200  # more than 40 waves of 100 take: every wave run_wave settles is full


class PendingNumbers(Numbers):
    """Numbers that keeps the most trees it had open after an emit."""

    def next_tuple(self):
        super().next_tuple()
        self.most_open = max(getattr(self, "most_open", 0), self.i - len(self.acked) - self.failed)


@pytest.mark.parametrize("depth", [2, None], ids=["two", "the_default"])
def test_full_waves_overlap_and_share_max_pending(spark_session, depth):
    """Every wave takes at most max pending / waves in flight, so that many run at once (three by
    default), and the marker of the next is out a wave ahead (its spout pulls once the verdicts
    that make room for it are in): run_wave starts a wave and returns with it and the ones before
    still open once the one before those ended (a wave max pending left no room in, its acks held
    for the first snapshot, ends the overlap for a moment). Every number is acked exactly once, and
    the spout never had more than max pending open."""
    b = TopologyBuilder()
    b.set_spout("numbers", PendingNumbers(LIMIT))
    b.set_bolt("digits", Digits(), parallelism=2).shuffle_grouping("numbers")
    conf = {Config.TOPOLOGY_MAX_SPOUT_PENDING: MAX_PENDING}
    if depth is not None:
        conf[Config.SQUALL_WAVES_IN_FLIGHT] = depth
    in_flight = depth or 3  # not read from Config.DEFAULTS: the test pins the default
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology("numbers", conf, b.create_topology())
        coord = cluster.coordinator("numbers")
        open_after, budgets, ahead = [], [], []
        while coord.waves_done < 40:
            coord.run_wave()
            open_after.append(len(coord.open_waves))
            budgets.extend(b for w in coord.open_waves.values() for b in w.marker.budgets.values())
            ahead.extend(w.marker.wave - w.marker.verdicts_through for w in coord.open_waves.values())
        cluster.wait_idle(120)
        spout = cluster.spout_instances("numbers", "numbers")[0]
    assert max(open_after) == in_flight and open_after.count(in_flight) >= 30  # mostly overlapped
    assert budgets and max(budgets) == -(-MAX_PENDING // in_flight)  # they share max pending
    assert max(ahead) == in_flight  # a wave's spout waits for the verdicts of the wave that many before
    assert 0 < spout.most_open <= MAX_PENDING
    assert spout.i == LIMIT and spout.failed == 0
    assert Counter(spout.acked) == Counter(range(LIMIT))
