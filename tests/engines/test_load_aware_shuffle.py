"""Load-aware shuffle on the Spark engine: a shuffle grouping sends the tasks of a busier slot fewer
tuples (as Storm 2's LoadAwareShuffleGrouping), and plain round robin with
`topology.disable.loadaware.messaging` true. Nothing is lost or counted twice either way, and the
waves a recovery runs again send each tuple to the task it first went to."""

from __future__ import annotations

import os
import signal
import zlib
from collections import Counter
from pathlib import Path

import pytest

from squall import BasicBolt, Config, LocalCluster, TopologyBuilder
from squall.engine.resident import recovery as driver_recovery
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


class HeavyPass(BasicBolt):
    """Passes each number on after work that costs CPU, so its slot is the busier one."""

    def declare_output_fields(self, d):
        d.declare(["n"])

    def execute(self, t, collector):
        h = t[0]
        for _ in range(300):
            h = zlib.crc32(b"x", h)
        collector.emit([t[0]])


class Where(BasicBolt):
    """Appends each number it executes to its task's own file: what outlives its slot's death."""

    def __init__(self, folder: str):
        self.folder = folder

    def prepare(self, conf, context):
        self.path = os.path.join(self.folder, f"{context.this_task_id}.txt")

    def declare_output_fields(self, d):
        d.declare(["n"])

    def execute(self, t, collector):
        with open(self.path, "a") as f:
            f.write(f"{t[0]}\n")


def test_waves_run_again_route_as_they_first_ran(spark_session, monkeypatch, tmp_path):
    """A slot killed after the weights moved for 30 waves, with only the first wave's snapshot: the
    waves since run again (a spout's batches are kept as they were routed; a bolt routes again), each
    under the weights it first ran with, so every number went to one task of the shuffle only (a
    Trident state behind a shuffle relies on it: a partition that committed a batch before the
    death skips it when it runs again)."""
    monkeypatch.setattr(driver_recovery, "SNAPSHOT_WORK", float("inf"))
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(LIMIT))
    b.set_bolt("heavy", HeavyPass()).shuffle_grouping("numbers")
    b.set_bolt("where", Where(str(tmp_path)), parallelism=2).shuffle_grouping("heavy")
    conf = {Config.TOPOLOGY_MAX_SPOUT_PENDING: MAX_PENDING, Config.SQUALL_SNAPSHOT_WAVES: 1000}
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology("where", conf, b.create_topology())
        coord = cluster.coordinator("where")
        while coord.waves_done < WAVES // 2:
            coord.run_wave()
        assert coord.balance.shares is not None  # the weights moved
        heavy_slot = coord.placement.bolts[coord.topology.task_ids["heavy"][0]]
        other = next(s for s in coord.pool.slots if s.index != heavy_slot)
        incarnation = other.incarnation
        os.kill(other.pid, signal.SIGKILL)
        assert other.wait_attached(incarnation, 120), "the killed slot did not come back"
        cluster.wait_idle(120)
        spout = cluster.spout_instances("where", "numbers")[0]
        assert coord.rollbacks == 1 and coord.rerun_waves >= WAVES // 2 - 2, (coord.rollbacks, coord.rerun_waves)
    assert sorted(spout.acked) == list(range(LIMIT)) and spout.failed == 0
    tasks_of: dict[int, set[str]] = {}
    for f in Path(tmp_path).glob("*.txt"):
        for line in f.read_text().split():
            tasks_of.setdefault(int(line), set()).add(f.stem)
    assert sorted(tasks_of) == list(range(LIMIT))
    moved = sorted(n for n, tasks in tasks_of.items() if len(tasks) > 1)
    assert not moved, f"{len(moved)} numbers went to another task when their wave ran again: {moved[:10]}"
