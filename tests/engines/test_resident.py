"""What the Spark engine's resident tasks (the default, squall.engine.resident) must prove: a task
keeps its state in its slot from wave to wave, and when a slot's process dies (killed between
waves, or in the middle of one) its tasks are rebuilt from their snapshots and logged steps, so
the results match the local engine's; a request that keeps killing its slot loses only its wave,
and the waves after it that built on its state leave no trace (nothing is applied twice); a
poison root is bisected out and dead-lettered; topologies share the slots."""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from squall import Bolt, Config, LocalCluster, TopologyBuilder
from squall.engine.resident import executor as resident
from tests.support.recovery_topologies import (
    PassOn,
    RecordExecutions,
    ReplayingFeeder,
    feed_rounds_with_a_poison,
    join_topology,
)

pytestmark = pytest.mark.spark

RESTART_SECS = 120


def kill_slots(cluster: LocalCluster, name: str) -> list[int]:
    """SIGKILL the process of every slot of a running topology (the pids its slots reported; they
    are Python workers of this test run's own SparkContext) and wait until each is back."""
    slots = cluster.coordinator(name).executor.slots
    before = [(s, s.incarnation, s.pid) for s in slots]
    for _, _, pid in before:
        os.kill(pid, signal.SIGKILL)
    for s, incarnation, _ in before:
        assert s.wait_attached(incarnation, RESTART_SECS), f"slot {s.index} did not come back"
    return [pid for _, _, pid in before]


def join_rounds(cluster_kwargs: dict, conf: dict, kill_at: tuple[int, ...] = (), rounds: int = 8):
    """tests/engines/test_spark_engine.py's rounds of joins; the slots killed after rounds `kill_at`."""
    feeder, tracker, topo = join_topology()
    with LocalCluster(simulated_time=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("join", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1000, **conf}, topo)
        msg = 0
        for rnd in range(rounds):
            for k in range(6):
                feeder.feed([f"k{k}", "left" if (rnd + k) % 3 == 0 else "right"], msg)
                msg += 1
            cluster.wait_idle()
            if rnd in kill_at:
                kill_slots(cluster, "join")
        coord = cluster.coordinator("join")
        assert not coord.errors, "\n".join(map(str, coord.errors))
        emitted = {task: list(v) for task, v in coord.captured["join"]["default"].items()}
        return (emitted, sorted(tracker.acked), sorted(tracker.failed), coord.pending_count), coord


def test_bolt_state_across_waves_matches_local(spark_session):
    local, _ = join_rounds({"engine": "local"}, {})
    spark, coord = join_rounds({"engine": "spark", "spark": spark_session}, {})
    assert spark == local
    assert sum(len(v) for v in spark[0].values()) > 20
    assert coord.executor.rebuilt_tasks == 0 and coord.executor.waves == 8


@pytest.mark.parametrize("snapshots", ["every_wave", "first_wave_only"])
def test_bolt_state_survives_killed_slots(spark_session, monkeypatch, snapshots):
    """Killed between waves: no wave is lost; the tasks come back from their snapshot, and with
    only the first wave's snapshot, by running every later step of theirs again."""
    if snapshots == "every_wave":
        conf = {Config.SQUALL_RESIDENT_SNAPSHOT_WAVES: 1}
    else:
        conf = {Config.SQUALL_RESIDENT_SNAPSHOT_WAVES: 1000}
        monkeypatch.setattr(resident, "SNAPSHOT_WORK", float("inf"))
    local, _ = join_rounds({"engine": "local"}, conf)
    spark, coord = join_rounds({"engine": "spark", "spark": spark_session}, conf, kill_at=(2, 5))
    assert spark == local
    ex = coord.executor
    assert coord.lost_waves == 0 and ex.rollbacks == 0
    assert all(s.deaths == 2 for s in ex.slots)
    tasks = sum(len(level) for level in ex.levels)
    assert ex.rebuilt_tasks == 2 * tasks
    if snapshots == "every_wave":
        assert ex.replayed_steps == 0
    else:  # the second kill ran again what each task took in the six rounds before it
        assert ex.replayed_steps >= 6 * len(ex.slots)


class CountPerKeyCrashingOnce(Bolt):
    """Counts per key (state carried from wave to wave), emits each new count; the first time any
    task meets "crash" it kills its own process (os._exit), after counting the tuples before it."""

    def __init__(self, marker):
        self.marker = marker

    def prepare(self, conf, context, collector):
        self.c = collector
        self.counts = {}

    def declare_output_fields(self, d):
        d.declare(["key", "count"])

    def execute(self, t):
        key = t[0]
        if key == "crash" and not os.path.exists(self.marker):
            Path(self.marker).write_text(str(os.getpid()))
            os._exit(1)
        self.counts[key] = self.counts.get(key, 0) + 1
        self.c.emit([key, self.counts[key]], anchors=t)
        self.c.ack(t)


def test_a_slot_that_dies_mid_wave_runs_it_again(spark_session, tmp_path):
    """The slot's request is sent again to its next process, after its tasks are rebuilt: the wave
    is not lost, no tree fails, and the counts are those of one pass (nothing counted twice)."""
    marker = tmp_path / "crashed"
    feeder = ReplayingFeeder(["key"])
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("count", CountPerKeyCrashingOnce(str(marker)), parallelism=2).fields_grouping("src", ["key"])
    keys = [f"k{i % 7}" for i in range(60)]
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True, capture=True) as cluster:
        cluster.submit_topology("crash", {Config.SQUALL_WAVE_MAX_TUPLES: 20}, b.create_topology())
        for i, k in enumerate(keys[:30]):
            feeder.feed([k], i)
        cluster.wait_idle()
        feeder.feed(["crash"], "crash")
        for i, k in enumerate(keys[30:], 30):
            feeder.feed([k], i)
        cluster.wait_idle()
        coord = cluster.coordinator("crash")
        counts = coord.captured["count"]["default"]
        slots = coord.executor.slots
    assert marker.exists()  # it did die
    assert sum(s.deaths for s in slots) == 1 and coord.lost_waves == 0
    assert feeder.fail_reasons == [] and sorted(map(str, feeder.acked)) == sorted([*map(str, range(60)), "crash"])
    final = {}
    for rows in counts.values():
        for key, n in rows:
            final[key] = max(final.get(key, 0), n)
    assert final == {**Counter(keys), "crash": 1}


class PoisonGate(PassOn):
    """Kills its process on "poison", every time."""

    def observe(self, value):
        if value == "poison":
            os._exit(1)


PER_ROUND, ROUNDS, POISON_ROUND = 10, 12, 4


@pytest.mark.parametrize("at_once", [False, True], ids=["round_by_round", "two_waves_in_flight"])
def test_a_poison_root_is_isolated_and_nothing_runs_twice(spark_session, tmp_path, at_once):
    """The poison kills its slot at every attempt: its wave is lost, bisected until the poison is
    alone, and the poison dead-lettered. The recording bolts (levels 2 and 3) never take a step of
    a lost wave or of one dropped after it, and a rollback rebuilds from a snapshot of the last
    good wave: every value is recorded exactly once."""
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    spout = ReplayingFeeder(["v"])
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("gate", PoisonGate(None), parallelism=2).shuffle_grouping("src")
    b.set_bolt("a", RecordExecutions(str(first)), parallelism=2).shuffle_grouping("gate")
    b.set_bolt("b", RecordExecutions(str(second)), parallelism=3).fields_grouping("a", ["v"])
    conf = {Config.SQUALL_MAX_REPLAYS: 3, Config.SQUALL_DEAD_LETTER_PATH: str(tmp_path / "dead.jsonl"),
            Config.SQUALL_RESIDENT_SNAPSHOT_WAVES: 1}
    if at_once:
        conf[Config.SQUALL_WAVE_MAX_TUPLES] = PER_ROUND
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True) as cluster:
        cluster.submit_topology("poison", conf, b.create_topology())
        expected = feed_rounds_with_a_poison(cluster, spout, ROUNDS, PER_ROUND, POISON_ROUND, at_once)
        coord = cluster.coordinator("poison")
        ex = coord.executor
        overlapped = coord.in_flight.submitted_behind
        deaths = sum(s.deaths for s in ex.slots)
    assert coord.lost_waves >= 3 and coord.dead_lettered == 1
    # each lost wave rolled back before the next wave ran (the last one's waits for a next wave),
    # from a snapshot of the last good wave: no step run again
    assert ex.rollbacks >= coord.lost_waves - 1 and ex.replayed_steps == 0
    assert deaths >= coord.lost_waves  # each lost wave killed its slot
    assert sorted(spout.acked) == sorted([*expected, "poison"])
    assert {k for _, k in spout.fail_reasons} == {"lost"}
    if at_once:
        assert overlapped >= ROUNDS - 2 and coord.in_flight.rerun >= 1
    assert Counter(first.read_text().split()) == Counter(expected)
    assert Counter(second.read_text().split()) == Counter(expected)


def test_topologies_share_the_slots(spark_session):
    """Two topologies at once on the same slots, each with its own state: both match local."""
    runs = {}
    for kwargs in ({"engine": "local"}, {"engine": "spark", "spark": spark_session}):
        feeders = {}
        with LocalCluster(simulated_time=True, capture=True, **kwargs) as cluster:
            for name in ("one", "two"):
                feeder, _tracker, topo = join_topology()
                feeders[name] = feeder
                cluster.submit_topology(name, {}, topo)
            for rnd in range(5):
                for name, feeder in feeders.items():
                    for k in range(4):
                        feeder.feed([f"{name}{k}", "left" if (rnd + k) % 2 else "right"], f"{rnd}.{k}")
                cluster.wait_idle()
            runs[kwargs["engine"]] = {n: cluster.coordinator(n).captured["join"]["default"] for n in feeders}
            if kwargs["engine"] == "spark":
                one, two = (cluster.coordinator(n).executor for n in feeders)
                assert one.slots is two.slots and one.pool.starts == two.pool.starts
    assert runs["spark"] == runs["local"]
    assert all(rows for per_task in runs["spark"].values() for rows in per_task.values())

