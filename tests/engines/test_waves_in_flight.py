"""Waves in flight on the Spark engine: under a full load the driver keeps
`squall.waves.in.flight` waves running at once, and max spout pending is shared by them, so a
topology whose waves max pending caps still overlaps them instead of running one at a time."""

from __future__ import annotations

from collections import Counter

from squall import Config, LocalCluster, TopologyBuilder
from tests.support.recovery_topologies import Digits, Numbers

LIMIT, MAX_PENDING = 6000, 200  # more than 40 waves of 100 take: every wave run_wave settles is full


def test_full_waves_overlap_and_share_max_pending(spark_session):
    """Every wave takes at most max pending / waves in flight, so two run at once: run_wave starts
    a wave and returns with it still running once the one before it ended (a wave max pending left
    no room in, its acks held for the first snapshot, ends the overlap for a moment). Every number
    is acked exactly once."""
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(LIMIT))
    b.set_bolt("digits", Digits(), parallelism=2).shuffle_grouping("numbers")
    conf = {Config.TOPOLOGY_MAX_SPOUT_PENDING: MAX_PENDING, Config.SQUALL_WAVES_IN_FLIGHT: 2}
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology("numbers", conf, b.create_topology())
        coord = cluster.coordinator("numbers")
        open_after, budgets = [], []
        while coord.waves_done < 40:
            coord.run_wave()
            open_after.append(len(coord.open_waves))
            budgets.extend(b for w in coord.open_waves.values() for b in w.marker.budgets.values())
        cluster.wait_idle(120)
        spout = cluster.spout_instances("numbers", "numbers")[0]
    assert max(open_after) == 1 and open_after.count(1) >= 30  # one left running: mostly overlapped
    assert budgets and max(budgets) == MAX_PENDING // 2  # the two share max pending
    assert spout.i == LIMIT and spout.failed == 0
    assert Counter(spout.acked) == Counter(range(LIMIT))
