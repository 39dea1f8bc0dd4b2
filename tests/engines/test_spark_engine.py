"""What only the Spark engine must prove: bolt instances carried across waves (also after a
Python worker dies), no stage computed twice, retried tasks keep trees balanced, lost waves
replayed and a poison root dead-lettered."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from squall import Bolt, Config, LocalCluster, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout

pytestmark = pytest.mark.spark


class CountAndJoin(Bolt):
    """Keeps a running count per key (state in attributes) and holds "left" tuples until the
    matching "right" one arrives, possibly many waves later; then emits both anchored, acks both."""

    def prepare(self, conf, context, collector):
        self.c = collector
        self.counts = {}
        self.left = {}

    def declare_output_fields(self, d):
        d.declare(["key", "count", "joined"])

    def execute(self, t):
        key, side = t[0], t[1]
        self.counts[key] = self.counts.get(key, 0) + 1
        if side == "left":
            self.left[key] = t
            return
        held = self.left.pop(key, None)
        if held is None:
            self.c.emit([key, self.counts[key], None], anchors=t)
            self.c.ack(t)
            return
        self.c.emit([key, self.counts[key], held[1]], anchors=[held, t])
        self.c.ack(held)
        self.c.ack(t)


class Sink(Bolt):
    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        pass

    def execute(self, t):
        self.c.ack(t)


def join_topology():
    feeder = FeederSpout(["key", "side"])
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("join", CountAndJoin(), parallelism=3).fields_grouping("src", ["key"])
    b.set_bolt("sink", Sink(), parallelism=2).shuffle_grouping("join")
    return feeder, tracker, b.create_topology()


def python_workers() -> list[int]:
    out = subprocess.run(["pgrep", "-f", "pyspark.(daemon|worker)"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != os.getpid()]


def run_rounds(cluster_kwargs, kill_workers_between=False):
    feeder, tracker, topo = join_topology()
    with LocalCluster(simulated_time=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("join", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1000}, topo)
        msg = 0
        for rnd in range(8):
            for k in range(6):
                side = "left" if (rnd + k) % 3 == 0 else "right"
                feeder.feed([f"k{k}", side], msg)
                msg += 1
            cluster.wait_idle()
            if kill_workers_between and rnd in (2, 5):
                for pid in python_workers():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        coord = cluster.coordinator("join")
        emitted = coord.captured["join"]["default"]
        return ({task: list(v) for task, v in emitted.items()}, sorted(tracker.acked), sorted(tracker.failed),
                coord.pending_count)


def test_bolt_state_across_waves_matches_local(spark_session):
    local = run_rounds({"engine": "local"})
    spark = run_rounds({"engine": "spark", "spark": spark_session})
    assert spark == local
    emitted, acked, failed, pending = spark
    assert sum(len(v) for v in emitted.values()) > 20
    assert failed == [] and pending == len(range(48)) - len(acked)
    assert any(row[2] == "left" for rows in emitted.values() for row in rows)  # joins across waves happened


def test_bolt_state_survives_killed_python_workers(spark_session):
    local = run_rounds({"engine": "local"})
    spark = run_rounds({"engine": "spark", "spark": spark_session}, kill_workers_between=True)
    assert spark == local


class RecordExecutions(Bolt):
    """Appends every executed value to a file: proves no stage is computed twice."""

    def __init__(self, path):
        self.path = path

    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        d.declare(["v"])

    def execute(self, t):
        with open(self.path, "a") as f:
            f.write(f"{t[0]}\n")
        self.c.emit([t[0]], anchors=t)
        self.c.ack(t)


def test_no_stage_computed_twice(spark_session, tmp_path):
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    feeder = FeederSpout(["v"])
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("a", RecordExecutions(str(first)), parallelism=2).shuffle_grouping("src")
    b.set_bolt("b", RecordExecutions(str(second)), parallelism=3).fields_grouping("a", ["v"])
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True) as cluster:
        cluster.submit_topology("count", {}, b.create_topology())
        for rnd in range(5):
            for i in range(40):
                feeder.feed([f"{rnd}-{i}"])
            cluster.wait_idle()
        expected = sorted(f"{r}-{i}" for r in range(5) for i in range(40))
        assert sorted(first.read_text().split()) == expected
        assert sorted(second.read_text().split()) == expected
        assert cluster.get_topology_stats("count")["src"]["acked"] == 200


class CrashOnFirstAttempt(Bolt):
    """Kills its Python worker (os._exit) on the first attempt of the task that sees "crash"."""

    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        d.declare(["v"])

    def execute(self, t):
        from pyspark import TaskContext

        if t[0] == "crash" and TaskContext.get().attemptNumber() == 0:
            os._exit(1)
        for i in range(3):
            self.c.emit([f"{t[0]}.{i}"], anchors=t)
        self.c.ack(t)


def test_worker_death_retried_by_spark_tree_completes_once(spark_session):
    feeder = FeederSpout(["v"])
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    acks = []
    tracker.ack = lambda m, _a=tracker.ack: (acks.append(m), _a(m))
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("crashy", CrashOnFirstAttempt(), parallelism=2).shuffle_grouping("src")
    b.set_bolt("sink", Sink(), parallelism=2).shuffle_grouping("crashy")
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True) as cluster:
        cluster.submit_topology("crash", {}, b.create_topology())
        for i, v in enumerate(["a", "crash", "b", "c"]):
            feeder.feed([v], i)
        cluster.wait_idle()
        assert sorted(acks) == [0, 1, 2, 3]  # every tree acked exactly once
        assert not tracker.failed
        assert cluster.coordinator("crash").lost_waves == 0


class ReplayingFeeder(FeederSpout):
    """Puts failed tuples back in its queue (a spout that replays)."""

    def __init__(self, fields):
        super().__init__(fields)
        self.sent = {}
        self.fail_reasons = []
        self.acked = []

    def next_tuple(self):
        try:
            values, msg_id = self._queue.popleft()
        except IndexError:
            return
        self.sent[msg_id] = values
        self._collector.emit(values, msg_id=msg_id)

    def ack(self, msg_id):
        self.acked.append(msg_id)

    def fail(self, msg_id, reason=None):
        self.fail_reasons.append((msg_id, reason.kind))
        self._queue.append((self.sent[msg_id], msg_id))


class AlwaysCrash(Bolt):
    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        pass

    def execute(self, t):
        if t[0] == "poison":
            os._exit(1)
        self.c.ack(t)


def test_poison_root_isolated_and_dead_lettered(spark_session, tmp_path):
    dlq = tmp_path / "dead.jsonl"
    spout = ReplayingFeeder(["v"])
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("work", AlwaysCrash(), parallelism=2).shuffle_grouping("src")
    conf = {Config.SQUALL_MAX_REPLAYS: 3, Config.SQUALL_DEAD_LETTER_PATH: str(dlq)}
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True) as cluster:
        cluster.submit_topology("poison", conf, b.create_topology())
        for i, v in enumerate(["a", "b", "poison", "c", "d"]):
            spout.feed([v], i)
        cluster.wait_idle(timeout_secs=600)
        coord = cluster.coordinator("poison")
        assert sorted(spout.acked) == [0, 1, 2, 3, 4]  # the poison is acked once it is dead-lettered
        assert coord.dead_lettered == 1
        (rec,) = [json.loads(line) for line in dlq.read_text().splitlines()]
        assert rec["msg_id"] == 2 and rec["values"] == ["poison"] and rec["attempts"] == 3
        assert rec["component"] == "src"
        assert "Python worker exited unexpectedly" in rec["error"]
        # the innocent roots of the first lost wave were failed ("lost") and replayed, never dead-lettered
        assert {k for _, k in spout.fail_reasons} == {"lost"}
        assert {m for m, _ in spout.fail_reasons} >= {0, 1, 3, 4}
        assert coord.lost_waves >= 3
