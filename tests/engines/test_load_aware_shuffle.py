"""Load-aware shuffle on the Spark engine: with `topology.disable.loadaware.messaging` false a
shuffle grouping sends the tasks of a busier slot fewer tuples (as Storm 2's
LoadAwareShuffleGrouping), and plain round robin when it is true (squall's default for now).
Nothing is lost or counted twice either way."""

from __future__ import annotations

import zlib
from collections import Counter

import pytest

from squall import BasicBolt, Config, LocalCluster, TopologyBuilder
from tests.support.recovery_topologies import Numbers

LIMIT, MAX_PENDING, WAVES = 6000, 200, 60


class HeavyNumbers(Numbers):
    """Numbers whose making costs CPU (a parse, say), so the spout's slot is the busier one."""

    def next_tuple(self):
        if self.i < self.limit:
            h = self.i
            for _ in range(300):  # work the spout's slot does for each tuple
                h = zlib.crc32(b"x", h)
        super().next_tuple()


class Light(BasicBolt):
    def declare_output_fields(self, d):
        d.declare(["n"])

    def execute(self, t, collector):
        pass


def _run(spark_session, off: bool) -> tuple[dict[int, int], dict[int, int], HeavyNumbers]:
    """Each `light` task's executed tuples in the second half of the waves, by the slot it runs in."""
    b = TopologyBuilder()
    b.set_spout("numbers", HeavyNumbers(LIMIT))
    b.set_bolt("light", Light(), parallelism=2).shuffle_grouping("numbers")
    conf = {Config.TOPOLOGY_MAX_SPOUT_PENDING: MAX_PENDING, Config.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING: off}
    executed: Counter = Counter()
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology("numbers", conf, b.create_topology())
        coord = cluster.coordinator("numbers")
        absorb = coord._report

        def tally(rep):
            if rep.wave > WAVES // 2:
                for comp, tid, c in rep.tasks:
                    if comp == "light":
                        executed[tid] += c.executed
            absorb(rep)

        coord._report = tally
        while coord.waves_done < WAVES:
            coord.run_wave()
        cluster.wait_idle(120)
        spout = cluster.spout_instances("numbers", "numbers")[0]
        slot_of = dict(coord.placement.bolts)
        spout_slot = next(iter(coord.placement.spouts.values()))
    by_slot = {"spout": 0, "other": 0}
    for tid, n in executed.items():
        by_slot["spout" if slot_of[tid] == spout_slot else "other"] += n
    return by_slot, slot_of, spout


@pytest.mark.parametrize("off", [False, True], ids=["load_aware", "round_robin"])
def test_shuffle_sends_the_busier_slot_fewer_tuples(spark_session, off):
    by_slot, slot_of, spout = _run(spark_session, off)
    assert len(set(slot_of.values())) == 2, "one light task in each slot"
    assert sorted(spout.acked) == list(range(LIMIT)) and spout.failed == 0
    if off:  # one spout task, round robin: the two tasks' shares differ by at most a tuple a wave
        assert abs(by_slot["spout"] - by_slot["other"]) <= WAVES
    else:
        assert by_slot["other"] >= 2 * by_slot["spout"] > 0, by_slot
