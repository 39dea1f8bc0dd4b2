"""What the Spark engine's slots must prove (docs/design.md): every task (spouts, bolts, ackers) keeps
its state in its slot from wave to wave, and when a slot's process dies (between waves, or in the
middle of one) every task rolls back to the confirmed snapshot, the dead slot's tasks move to live
slots, and the waves since the snapshot run again from the spouts' kept batches, so the results
match the local engine's; a wave that keeps killing its slot is lost alone, and a poison root is
bisected out and dead-lettered; topologies share the slots; nothing a bolt emits crosses the
driver's connections."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from squall import BasicBolt, Bolt, Config, LocalCluster, Spout, TopologyBuilder
from squall.engine.resident import recovery as driver_recovery
from tests.support.recovery_topologies import (
    Digits,
    PassOn,
    RecordExecutions,
    ReplayingFeeder,
    feed_rounds_with_a_poison,
    join_topology,
)

pytestmark = pytest.mark.spark

RESTART_SECS = 120


def kill_slots(cluster: LocalCluster, name: str, which: list[int] | None = None) -> list[int]:
    """SIGKILL the processes of a running topology's slots (all, or `which`; the pids its slots
    reported: Python workers of this test run's own SparkContext) and wait until each is back."""
    slots = cluster.coordinator(name).pool.slots
    before = [(s, s.incarnation, s.pid) for s in slots if which is None or s.index in which]
    for _, _, pid in before:
        os.kill(pid, signal.SIGKILL)
    for s, incarnation, _ in before:
        assert s.wait_attached(incarnation, RESTART_SECS), f"slot {s.index} did not come back"
    return [pid for _, _, pid in before]


def join_rounds(cluster_kwargs: dict, conf: dict, kill_at: tuple[int, ...] = (), rounds: int = 8):
    """Rounds of joins held across waves (tests/support/recovery_topologies.py); the slots are
    killed after rounds `kill_at`."""
    feeder, tracker, topo = join_topology()
    with LocalCluster(simulated_time=True, stepped=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("join", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1000, **conf}, topo)
        msg = 0
        for rnd in range(rounds):
            for k in range(6):
                feeder.feed([f"k{k}", "left" if (rnd + k) % 3 == 0 else "right"], msg)
                msg += 1
            cluster.wait_idle()
            if rnd in kill_at:
                kill_slots(cluster, "join")
        cluster.wait_idle()
        coord = cluster.coordinator("join")
        assert not coord.errors, "\n".join(map(str, coord.errors))
        emitted = {task: list(v) for task, v in coord.captured["join"]["default"].items()}
        return (emitted, sorted(tracker.acked), sorted(tracker.failed), coord.pending_count), coord


def test_bolt_state_across_waves_matches_local(spark_session):
    local, _ = join_rounds({"engine": "local"}, {})
    spark, coord = join_rounds({"engine": "spark", "spark": spark_session}, {})
    assert spark == local
    assert sum(len(v) for v in spark[0].values()) > 20
    assert coord.rollbacks == 0 and coord.confirmed > 0


@pytest.mark.parametrize("snapshots", ["every_wave", "first_wave_only"])
def test_bolt_state_survives_killed_slots(spark_session, monkeypatch, snapshots):
    """Every slot killed between waves: no wave is lost; the tasks come back from the snapshot,
    and with only the first wave's snapshot, by running every wave since again."""
    if snapshots == "every_wave":
        conf = {Config.SQUALL_SNAPSHOT_WAVES: 1}
    else:
        conf = {Config.SQUALL_SNAPSHOT_WAVES: 1000}
        monkeypatch.setattr(driver_recovery, "SNAPSHOT_WORK", float("inf"))
    local, _ = join_rounds({"engine": "local"}, conf)
    spark, coord = join_rounds({"engine": "spark", "spark": spark_session}, conf, kill_at=(2, 5))
    assert spark == local
    assert coord.lost_waves == 0 and coord.rollbacks == 2
    if snapshots == "every_wave":
        assert coord.rerun_waves == 0  # the snapshot was the last wave each time
    else:  # the second kill ran again the waves of the six rounds before it
        assert coord.confirmed == 1 and coord.rerun_waves >= 6


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
    """The wave runs again from the snapshot before it: it is not lost, no tree fails, and the
    counts are those of one pass (nothing counted twice)."""
    marker = tmp_path / "crashed"
    feeder = ReplayingFeeder(["key"])
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("count", CountPerKeyCrashingOnce(str(marker)), parallelism=2).fields_grouping("src", ["key"])
    keys = [f"k{i % 7}" for i in range(60)]
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True, stepped=True, capture=True) as cluster:
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
        slots = coord.pool.slots
    assert marker.exists()  # it did die
    assert sum(s.deaths for s in slots) == 1 and coord.lost_waves == 0 and coord.rollbacks == 1
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
    alone, and the poison dead-lettered. With a snapshot every wave, the recording bolts (levels 2
    and 3) never take a step of a lost wave, and a rollback runs no completed wave again: round by
    round every value is recorded exactly once. With two waves in flight, the wave running beside
    the poison's may have taken its steps and not ended when the slot dies: a rollback runs it
    again (at least once, as docs/design.md says of writes to an outside system), one wave of
    values a rollback at most."""
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    spout = ReplayingFeeder(["v"])
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("gate", PoisonGate(None), parallelism=2).shuffle_grouping("src")
    b.set_bolt("a", RecordExecutions(str(first)), parallelism=2).shuffle_grouping("gate")
    b.set_bolt("b", RecordExecutions(str(second)), parallelism=3).fields_grouping("a", ["v"])
    dead = tmp_path / "dead.jsonl"
    conf = {Config.SQUALL_MAX_REPLAYS: 3, Config.SQUALL_DEAD_LETTER_PATH: str(dead),
            Config.SQUALL_SNAPSHOT_WAVES: 1}
    if at_once:
        conf[Config.SQUALL_WAVE_MAX_TUPLES] = PER_ROUND
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology("poison", conf, b.create_topology())
        expected = feed_rounds_with_a_poison(cluster, spout, ROUNDS, PER_ROUND, POISON_ROUND, at_once)
        coord = cluster.coordinator("poison")
        deaths = sum(s.deaths for s in coord.pool.slots)
    assert coord.lost_waves >= 3 and coord.dead_lettered == 1
    assert '"poison"' in dead.read_text()
    assert deaths >= coord.lost_waves  # each lost wave killed its slot
    assert sorted(spout.acked) == sorted([*expected, "poison"])
    assert {k for _, k in spout.fail_reasons} == {"lost"}
    for recorded in (Counter(first.read_text().split()), Counter(second.read_text().split())):
        if not at_once:
            assert recorded == Counter(expected)
            continue
        assert set(recorded) == set(expected)  # each at least once, and nothing else
        assert recorded.total() - len(expected) <= coord.rollbacks * PER_ROUND


def test_topologies_share_the_slots(spark_session):
    """Two topologies at once on the same slots, each with its own state: both match local."""
    runs = {}
    for kwargs in ({"engine": "local"}, {"engine": "spark", "spark": spark_session}):
        feeders = {}
        with LocalCluster(simulated_time=True, stepped=True, capture=True, **kwargs) as cluster:
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
                one, two = (cluster.coordinator(n) for n in feeders)
                assert one.pool is two.pool and one.pool.slots == two.pool.slots
    assert runs["spark"] == runs["local"]
    assert all(rows for per_task in runs["spark"].values() for rows in per_task.values())


class NumberSpout(Spout):
    """Emits 0 .. limit-1 (one a call, msg id the number), in a slot: its state pickles."""

    def __init__(self, limit):
        self.limit = limit

    def declare_output_fields(self, d):
        d.declare(["n"])

    def open(self, conf, context, collector):
        self.c = collector
        self.i = context.this_task_index
        self.step = len(context.component_tasks(context.this_component_id))
        self.acked = 0

    def next_tuple(self):
        if self.i < self.limit:
            self.c.emit([self.i], msg_id=self.i)
            self.i += self.step

    def ack(self, msg_id):
        self.acked += 1


class DigitCount(BasicBolt):
    def prepare(self, conf, context):
        self.counts = {}

    def declare_output_fields(self, d):
        d.declare(["digit", "count"])

    def execute(self, t, collector):
        self.counts[t[0]] = self.counts.get(t[0], 0) + 1
        collector.emit([t[0], self.counts[t[0]]])


def digits_topology(limit: int) -> object:
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(limit), parallelism=2)
    b.set_bolt("digits", Digits(), parallelism=2).shuffle_grouping("numbers")
    b.set_bolt("count", DigitCount(), parallelism=2).fields_grouping("digits", ["digit"])
    return b.create_topology()


def final_counts(coord) -> dict:
    final: dict = {}
    for rows in coord.captured["count"]["default"].values():
        for digit, n in rows:
            final[digit] = max(final.get(digit, 0), n)
    return final


def test_a_spout_slot_killed_mid_stream_loses_nothing_and_counts_once(spark_session):
    """Spout tasks run in the slots: killing a slot that holds one (real time, mid-stream) restores
    it from its snapshot on a live slot; every number is acked and counted exactly once."""
    limit = 6000
    expected = Counter(ch for i in range(limit) for ch in str(i))
    with LocalCluster(engine="spark", spark=spark_session, capture=True) as cluster:
        cluster.submit_topology("digits", {Config.SQUALL_WAVE_MAX_TUPLES: 100}, digits_topology(limit))
        coord = cluster.coordinator("digits")
        deadline = time.monotonic() + 60
        while coord.waves_done < 6 and time.monotonic() < deadline:
            time.sleep(0.005)
        spout_slot = coord.placement.spouts[min(coord.placement.spouts)]
        os.kill(coord.pool.slots[spout_slot].pid, signal.SIGKILL)
        cluster.wait_idle(120)
        assert coord.rollbacks >= 1 and coord.lost_waves == 0
        spouts = cluster.spout_instances("digits", "numbers")
        assert [s.i >= limit for s in spouts] == [True, True]
        assert sum(s.acked for s in spouts) == limit  # each spout's own count, as its state was restored
        assert final_counts(coord) == dict(expected)


class SpoutOpeningFlakily(Spout):
    """Emits 0..limit-1 from each open (a replaying source); a lock taken in `open` keeps it from
    pickling, so a recovery opens it anew. Its calls are logged in a file (they happen in the
    slots' processes); the opens numbered in `failing` raise, as a broker unreachable for a
    moment would."""

    def __init__(self, limit: int, calls: str, failing: tuple[int, ...] = ()):
        self.limit = limit
        self.calls = calls
        self.failing = failing

    def _log(self, call: str) -> int:
        with open(self.calls, "a") as f:
            f.write(call + "\n")
        return Path(self.calls).read_text().splitlines().count(call)

    def open(self, conf, context, collector):
        n = self._log("open")
        if n in self.failing:
            raise ConnectionError(f"broker unreachable (open {n})")
        self.lock = threading.Lock()
        self.c = collector
        self.i = 0

    def activate(self):
        self._log("activate")

    def deactivate(self):
        self._log("deactivate")

    def declare_output_fields(self, d):
        d.declare(["n"])

    def next_tuple(self):
        if self.i < self.limit:
            self.c.emit([self.i], msg_id=self.i)
            self.i += 1


class Echo(BasicBolt):
    def declare_output_fields(self, d):
        d.declare(["n"])

    def execute(self, t, collector):
        collector.emit([t[0]])


def test_a_spout_that_cannot_open_in_a_recovery_is_tried_again(spark_session, tmp_path):
    """The spout's slot is killed; made again on a live slot its open fails twice: it is tried
    again with backoff (not the topology stopped), its failures are the topology's errors, and
    every number is still processed."""
    limit, opens = 4000, tmp_path / "opens"
    b = TopologyBuilder()
    b.set_spout("src", SpoutOpeningFlakily(limit, str(opens), failing=(2, 3)))
    b.set_bolt("pass", Echo(), parallelism=2).shuffle_grouping("src")
    with LocalCluster(engine="spark", spark=spark_session, capture=True) as cluster:
        cluster.submit_topology("flaky", {Config.SQUALL_WAVE_MAX_TUPLES: 100}, b.create_topology())
        coord = cluster.coordinator("flaky")
        deadline = time.monotonic() + 60
        while coord.waves_done < 6 and time.monotonic() < deadline:
            time.sleep(0.005)
        os.kill(coord.pool.slots[coord.placement.spouts[min(coord.placement.spouts)]].pid, signal.SIGKILL)
        cluster.wait_idle(120)
        errors = cluster.get_errors("flaky")
        seen = {row[0] for rows in coord.captured["pass"]["default"].values() for row in rows}
    assert opens.read_text().splitlines() == ["open", "activate", "open", "open", "open", "activate"]
    assert coord.rollbacks >= 1
    assert sum("broker unreachable" in str(e) for e in errors) == 2, "\n".join(map(str, errors))
    assert seen == set(range(limit))


def test_a_spout_made_again_while_deactivated_is_not_activated(spark_session, tmp_path):
    """As Storm: a spout task made anew while its topology is deactivated is opened, not
    activated; activating the topology activates it."""
    calls = tmp_path / "calls"
    b = TopologyBuilder()
    b.set_spout("src", SpoutOpeningFlakily(10**9, str(calls)))
    b.set_bolt("pass", Echo(), parallelism=2).shuffle_grouping("src")
    with LocalCluster(engine="spark", spark=spark_session) as cluster:
        cluster.submit_topology("idle", {Config.SQUALL_WAVE_MAX_TUPLES: 100}, b.create_topology())
        coord = cluster.coordinator("idle")
        deadline = time.monotonic() + 60
        while coord.waves_done < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        cluster.deactivate("idle")
        deadline = time.monotonic() + 60
        while "deactivate" not in calls.read_text() and time.monotonic() < deadline:
            time.sleep(0.01)
        kill_slots(cluster, "idle", [coord.placement.spouts[min(coord.placement.spouts)]])
        deadline = time.monotonic() + RESTART_SECS
        while coord.rollbacks < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        waves = coord.waves_done
        while coord.waves_done < waves + 2 and time.monotonic() < deadline:  # the slots rolled back by then
            time.sleep(0.05)
        opened_again = calls.read_text().splitlines()
        cluster.activate("idle")
        deadline = time.monotonic() + 60
        while calls.read_text().splitlines()[-1] != "activate" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not cluster.get_errors("idle")
    assert coord.rollbacks >= 1
    assert opened_again == ["open", "activate", "deactivate", "open"]
    assert calls.read_text().splitlines() == ["open", "activate", "deactivate", "open", "activate"]


def test_no_tuple_crosses_the_drivers_connections(spark_session):
    """Spouts, bolts and ackers run in the slots: the driver's links carry markers and reports
    only. By bytes counted: no frame (a pickled batch) either way, and far fewer bytes than the
    tuples the slots sent each other."""
    with LocalCluster(engine="spark", spark=spark_session) as cluster:
        cluster.submit_topology("digits", {}, digits_topology(20000))
        cluster.wait_idle(120)
        coord = cluster.coordinator("digits")
        slots = coord.pool.slots
        assert cluster.get_topology_stats("digits")["numbers"]["acked"] == 20000
        to_slots = sum(s.sent.frame_bytes for s in slots)
        from_slots = sum(s.received.frame_bytes for s in slots)
        control = sum(s.sent.bytes + s.received.bytes for s in slots)
        peers = coord.peer_bytes()
    assert to_slots == 0 and from_slots == 0
    assert peers > 100_000 and control * 5 < peers, (control, peers)
