"""What only the Spark engine's per-wave tasks (`squall.spark.tasks: per-wave`, one Spark job a
wave) must prove: bolt instances carried across waves (also after a Python worker dies), no
stage computed twice, retried tasks keep trees balanced, lost waves replayed and a poison root
dead-lettered. Resident tasks prove the same in test_resident.py."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import pytest

from squall import Bolt, Config, LocalCluster, TopologyBuilder
from squall.engine.spark.executor import CHECKPOINT_EVERY_WAVES, STATE_SHUFFLE_BYTES
from squall.testing import AckFailMapTracker, FeederSpout
from tests.support.engine_processes import kill_python_workers
from tests.support.recovery_topologies import (
    CountAndJoin,
    PassOn,
    RecordExecutions,
    ReplayingFeeder,
    Sink,
    feed_rounds_with_a_poison,
    join_topology,
    marker_lines,
)

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def per_wave_tasks(monkeypatch):
    """Every Spark topology of this module runs its tasks per wave (the default is resident)."""
    monkeypatch.setitem(Config.DEFAULTS, Config.SQUALL_SPARK_TASKS, "per-wave")


def run_rounds(cluster_kwargs, kill_workers_between=False, evict_between=False, rounds=8, at=(2, 5), checks=None):
    """`rounds` rounds of joins; with `kill_workers_between`, this session's Python processes are
    killed after the rounds `at`; with `evict_between`, the cached outputs that carry the
    instances are dropped then (as Spark drops blocks when memory runs short; not a local
    checkpoint's, which Spark spills to disk), so the next wave rebuilds them from their lineage,
    back to the first wave's spout input or the last checkpoint. Returns what was emitted and
    acked, and how many workers (the processes the pyspark daemon forked, which hold the carried
    instances) were killed each time. `checks` is called with the coordinator at the end."""
    feeder, tracker, topo = join_topology()
    killed = []
    with LocalCluster(simulated_time=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("join", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1000}, topo)
        msg = 0
        for rnd in range(rounds):
            for k in range(6):
                side = "left" if (rnd + k) % 3 == 0 else "right"
                feeder.feed([f"k{k}", side], msg)
                msg += 1
            cluster.wait_idle()
            if kill_workers_between and rnd in at:
                procs = kill_python_workers(cluster_kwargs["spark"])
                pids = {p.pid for p in procs}
                killed.append(sum(p.ppid in pids for p in procs))  # children of the killed daemon
            if evict_between and rnd in at:
                executor = cluster.coordinator("join").executor
                for out in executor._good:
                    if not executor.checkpoints.holds(out):
                        out.unpersist(blocking=True)
                killed.append(len(kill_python_workers(cluster_kwargs["spark"])))  # and the instances they hold
        coord = cluster.coordinator("join")
        # A wave lost on the way (its roots failed, never replayed by the feeder) or a step from an
        # older State (StateLost) would show as lower counts: say which, rather than only the diff.
        assert not coord.errors, "\n".join(map(str, coord.errors))
        if checks is not None:
            checks(coord)
        emitted = coord.captured["join"]["default"]
        return ({task: list(v) for task, v in emitted.items()}, sorted(tracker.acked), sorted(tracker.failed),
                coord.pending_count), killed


def test_bolt_state_across_waves_matches_local(spark_session):
    local, _ = run_rounds({"engine": "local"})
    spark, _ = run_rounds({"engine": "spark", "spark": spark_session})
    assert spark == local
    emitted, acked, failed, pending = spark
    assert sum(len(v) for v in emitted.values()) > 20
    assert failed == [] and pending == len(range(48)) - len(acked)
    assert any(row[2] == "left" for rows in emitted.values() for row in rows)  # joins across waves happened


def test_bolt_state_survives_killed_python_workers(spark_session):
    local, _ = run_rounds({"engine": "local"})
    spark, killed = run_rounds({"engine": "spark", "spark": spark_session}, kill_workers_between=True)
    assert len(killed) == 2 and min(killed) >= 1  # each time, at least one of this session's workers died
    assert spark == local


def test_a_wave_built_on_an_older_state_is_reported(spark_session):
    """Were a wave built on an older State than its tasks' last steps left (what a rebuild gone
    wrong would do), its updates since would be lost while every tuple is acked: the driver
    checks each task's reported starting State and records an error that names the task."""
    feeder, tracker, topo = join_topology()
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True, capture=True) as cluster:
        cluster.submit_topology("join", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1000}, topo)
        executor = cluster.coordinator("join").executor
        feeder.feed(["k0", "right"], 0)
        cluster.wait_idle()
        older = executor._good
        for msg in (1, 2):
            feeder.feed(["k0", "right"], msg)
            cluster.wait_idle()
        assert cluster.get_errors("join") == []
        executor._state = older  # the next wave builds on the first wave's States (rebuilt from lineage)
        feeder.feed(["k0", "right"], 3)
        cluster.wait_idle()
        errors = cluster.get_errors("join")
        emitted = [row for rows in cluster.coordinator("join").captured["join"]["default"].values() for row in rows]
    assert sorted(tracker.acked) == [0, 1, 2, 3]  # acked all the same: only the check tells
    assert [row[1] for row in emitted if row[0] == "k0"] == [1, 2, 3, 2]  # the count went back
    joins = [e for e in errors if e.component == "join"]
    assert len(joins) == 1 and all(e.error.startswith("StateLost: ") for e in errors)
    assert "started from the State of wave" in joins[0].error and "but its last step was wave" in joins[0].error


def test_bolt_state_rebuilt_from_lineage_after_evicted_caches(spark_session):
    """The cached outputs dropped twice: each time the next wave's tasks rebuild their State by
    running every earlier wave again from its spout input (held in files until a checkpoint)."""
    local, _ = run_rounds({"engine": "local"})
    spark, killed = run_rounds({"engine": "spark", "spark": spark_session}, evict_between=True)
    assert len(killed) == 2 and min(killed) >= 1
    assert spark == local


def test_bolt_state_rebuilt_from_a_local_checkpoint_after_evicted_caches(spark_session):
    """On a local master the checkpoint is local (its cached blocks, nothing written): caches
    dropped three waves after it are rebuilt from it and the spout input held since."""
    rounds, evict_at = CHECKPOINT_EVERY_WAVES + 6, CHECKPOINT_EVERY_WAVES + 2
    seen = {}

    def checks(coord):
        executor = coord.executor
        seen.update(kind=executor.checkpoints.kind, written=executor.checkpoints.written, cut=executor._inputs.cut_at,
                    files=checkpointed_rdds(spark_session))

    before = checkpointed_rdds(spark_session)
    local, _ = run_rounds({"engine": "local"}, rounds=rounds)
    spark, killed = run_rounds({"engine": "spark", "spark": spark_session}, evict_between=True, rounds=rounds,
                               at=(evict_at,), checks=checks)
    assert seen["kind"] == "local" and seen["written"] == 2 and seen["cut"] == CHECKPOINT_EVERY_WAVES
    assert seen["files"] == before  # nothing written to the checkpoint directory
    assert len(killed) == 1 and killed[0] >= 1
    assert spark == local


def test_checkpoint_kind_is_checked_at_submit(spark_session):
    """A kind that does not exist, or a local checkpoint where executors are JVMs of their own
    (it would be the only copy of their state), is refused and the message says what to use."""
    from squall.engine.spark.checkpoints import checkpoint_kind

    with pytest.raises(ValueError, match="'local', 'reliable'"):
        checkpoint_kind({Config.SQUALL_SPARK_CHECKPOINT: "disk"}, "local[2]")
    with pytest.raises(ValueError, match="use 'reliable'"):
        checkpoint_kind({Config.SQUALL_SPARK_CHECKPOINT: "local"}, "spark://host:7077")
    assert checkpoint_kind({}, "local[2,4]") == "local"
    assert checkpoint_kind({}, "local-cluster[2,1,1024]") == "reliable"
    assert checkpoint_kind({Config.SQUALL_SPARK_CHECKPOINT: "reliable"}, "local[2]") == "reliable"
    feeder, _, topo = join_topology()
    with LocalCluster(engine="spark", spark=spark_session) as cluster, pytest.raises(ValueError, match="disk"):
        cluster.submit_topology("bad", {Config.SQUALL_SPARK_CHECKPOINT: "disk"}, topo)


@pytest.mark.parametrize("kind", ["reliable", "local"])
def test_old_checkpoints_are_removed(spark_session, kind):
    """Over four checkpoints, each level's checkpoint of all but the last two is removed: files
    (Spark never deletes them: a topology left running filled its checkpoint directory), or a
    local checkpoint's cached blocks (kept until then, though newer waves are good)."""
    feeder, tracker, topo = join_topology()
    deleted = []
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True) as cluster:
        cluster.submit_topology("ckpt", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1000,
                                         Config.SQUALL_SPARK_CHECKPOINT: kind}, topo)
        files = cluster.coordinator("ckpt").executor.checkpoints
        files._remove = lambda old, _r=files._remove: (deleted.append(old), _r(old))
        for i in range(4 * CHECKPOINT_EVERY_WAVES + 2):
            feeder.feed([f"k{i % 5}", "right"], i)
            cluster.wait_idle()  # a wave each
        kept = [p for paths in files._kept for p in paths]
        persisted = {int(i) for i in spark_session.sparkContext._jsc.getPersistentRDDs().keySet()}
    levels = 2
    assert files.kind == kind and files.written == 4 * levels and len(kept) == 2 * levels
    assert len({id(d) for d in deleted}) == len(deleted) == files.removed == 2 * levels
    assert sorted(tracker.acked) == list(range(4 * CHECKPOINT_EVERY_WAVES + 2))
    if kind == "reliable":
        on_disk = lambda p: Path(urlparse(p).path).exists()  # noqa: E731
        assert all(on_disk(p) for p in kept) and not any(on_disk(p) for p in deleted)
    else:  # the blocks of the kept checkpoints are still cached, of the removed ones not
        assert {o.id() for o in kept} <= persisted and not {o.id() for o in deleted} & persisted
        assert all(o.isLocallyCheckpointed() for o in kept)


def spark_attempt() -> tuple[int, int, int]:
    """(stage, partition, attempt number) of the Spark task running this code."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    return tc.stageId(), tc.partitionId(), tc.attemptNumber()


def crash_worker(marker: str, *facts: object) -> None:
    """Note this attempt's death in `marker`, then kill its Python worker: the test reads the
    marker to know the crash really happened (without it, a crash test passes vacuously)."""
    with open(marker, "a") as f:
        f.write(" ".join(map(str, (*spark_attempt(), *facts))) + "\n")
    os._exit(1)


class PoisonGate(PassOn):
    """Kills its Python worker on "poison", at every attempt (noted in the marker file `path`)."""

    def observe(self, value):
        if value == "poison":
            crash_worker(self.path)


def checkpointed_rdds(spark) -> set[str]:
    """The RDD checkpoints written so far under this session's checkpoint directory."""
    root = Path(urlparse(spark.sparkContext.getCheckpointDir()).path)
    return {p.name for p in root.glob("rdd-*")} if root.exists() else set()


ROUNDS = CHECKPOINT_EVERY_WAVES + 7  # one checkpoint, with waves after it resuming from it
POISON_ROUND, PER_ROUND = 10, 10


@pytest.mark.parametrize(("at_once", "kind"), [(False, "local"), (True, "local"), (False, "reliable")],
                         ids=["round_by_round", "two_waves_in_flight", "round_by_round_reliable_checkpoint"])
def test_no_stage_computed_twice_across_a_checkpoint_and_a_bisected_lost_wave(spark_session, tmp_path, at_once,
                                                                              kind):
    """Every value runs through the recording bolts exactly once over >= 30 waves, though the
    carried state is checkpointed on the way and a poison root kills its wave again and again
    until the coordinator has bisected it out and dead-lettered it. The poison dies at level 1,
    so the recording bolts (levels 2 and 3) only ever run in jobs that succeed: any second
    execution there is a stage computed twice (lineage recomputed, a checkpoint recomputing
    instead of reading the cache, ...). `at_once`: every round is fed before the first wave and
    waves take a round each, so two waves are in flight: the wave after a lost one, which built
    on its state, is dropped and run again, and its roots never fail."""
    first, second, crashes = tmp_path / "first.txt", tmp_path / "second.txt", tmp_path / "crashes.txt"
    spout = ReplayingFeeder(["v"])
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("gate", PoisonGate(str(crashes)), parallelism=2).shuffle_grouping("src")
    b.set_bolt("a", RecordExecutions(str(first)), parallelism=2).shuffle_grouping("gate")
    b.set_bolt("b", RecordExecutions(str(second)), parallelism=3).fields_grouping("a", ["v"])
    conf = {Config.SQUALL_MAX_REPLAYS: 3, Config.SQUALL_DEAD_LETTER_PATH: str(tmp_path / "dead.jsonl"),
            Config.SQUALL_WAVES_IN_FLIGHT: 2, Config.SQUALL_SPARK_CHECKPOINT: kind}
    if at_once:
        conf[Config.SQUALL_WAVE_MAX_TUPLES] = PER_ROUND
    checkpoints_before = checkpointed_rdds(spark_session)
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True) as cluster:
        cluster.submit_topology("count", conf, b.create_topology())
        expected = feed_rounds_with_a_poison(cluster, spout, ROUNDS, PER_ROUND, POISON_ROUND, at_once)
        coord = cluster.coordinator("count")
        overlapped = coord.in_flight.submitted_behind
        jobs_done = coord.executor.waves  # Spark jobs that succeeded (whole waves and bisected parts)
        bisected_parts = coord.wave - coord.waves_done  # each part of a split wave takes a wave number
        lost_errors = [e for e in cluster.get_errors("count") if e.kind == "lost"]
        inputs = coord.executor._inputs
        held, cut_at, input_dir = inputs.held_builds, inputs.cut_at, Path(inputs.dir)
        files = {int(p.name.split("-")[0]) for p in input_dir.iterdir()}
    # the spout input of every build up to the checkpoint is gone, of the builds after it kept
    assert cut_at >= CHECKPOINT_EVERY_WAVES and held and min(held) > cut_at and files == set(held)
    assert not input_dir.exists()  # removed with the topology
    # the checkpoint and the bisection both happened
    assert jobs_done >= CHECKPOINT_EVERY_WAVES + 5
    assert coord.executor.checkpoints.written >= 3  # each level's carried state
    if kind == "reliable":
        assert len(checkpointed_rdds(spark_session) - checkpoints_before) >= 3
    assert coord.lost_waves >= 3 and len(lost_errors) == coord.lost_waves
    assert bisected_parts >= 2
    assert len(marker_lines(crashes)) >= coord.lost_waves  # every lost job killed a worker
    if at_once:  # waves did run two at a time, and the one after the poison's was run again
        assert overlapped >= ROUNDS - 2
        assert coord.in_flight.rerun >= 1
        # the poison's wave held it and the next nine values; the wave after it did not fail
        innocents = {f"{POISON_ROUND}-{i}" for i in range(PER_ROUND - 1)}
    else:
        # the innocent roots of the poison's wave were lost once, then completed in the poison-free halves
        innocents = {f"{POISON_ROUND}-{i}" for i in range(PER_ROUND)}
    assert Counter(m for m, _ in spout.fail_reasons) == Counter({**dict.fromkeys(innocents, 1), "poison": 2})
    assert {k for _, k in spout.fail_reasons} == {"lost"}
    assert coord.dead_lettered == 1 and sorted(spout.acked) == sorted([*expected, "poison"])
    # no stage computed twice
    assert Counter(first.read_text().split()) == Counter(expected)
    assert Counter(second.read_text().split()) == Counter(expected)


def feeder_with_acks(fields):
    """A feeder, its tracker, and the list of every ack in order (a duplicate ack shows twice)."""
    feeder = FeederSpout(fields)
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    acks = []
    tracker.ack = lambda m, _a=tracker.ack: (acks.append(m), _a(m))
    return feeder, tracker, acks


class CrashOnFirstAttempt(Bolt):
    """Kills its Python worker (os._exit) on the first attempt of the task that sees "crash"."""

    def __init__(self, marker):
        self.marker = marker

    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        d.declare(["v"])

    def execute(self, t):
        if t[0] == "crash" and spark_attempt()[2] == 0:
            crash_worker(self.marker)
        for i in range(3):
            self.c.emit([f"{t[0]}.{i}"], anchors=t)
        self.c.ack(t)


def test_worker_death_retried_by_spark_tree_completes_once(spark_session, tmp_path):
    crashes = tmp_path / "crashes.txt"
    feeder, tracker, acks = feeder_with_acks(["v"])
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("crashy", CrashOnFirstAttempt(str(crashes)), parallelism=2).shuffle_grouping("src")
    b.set_bolt("sink", Sink(), parallelism=2).shuffle_grouping("crashy")
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True) as cluster:
        cluster.submit_topology("crash", {}, b.create_topology())
        for i, v in enumerate(["a", "crash", "b", "c"]):
            feeder.feed([v], i)
        cluster.wait_idle()
        (crash,) = marker_lines(crashes)  # the worker did die, once, in a first attempt
        assert crash[2] == 0
        assert sorted(acks) == [0, 1, 2, 3]  # every tree acked exactly once
        assert not tracker.failed
        assert cluster.coordinator("crash").lost_waves == 0  # Spark's own task retry recovered it
        assert cluster.get_topology_stats("crash")["sink"]["executed"] == 12


class CountPerKey(Bolt):
    """Counts tuples per key in an attribute (state carried from wave to wave) and emits each
    new count. The first attempt of the task that meets a "crash" tuple dies there, after
    applying to its counts the tuples before it in the same partition."""

    def __init__(self, marker):
        self.marker = marker

    def prepare(self, conf, context, collector):
        self.c = collector
        self.counts = {}
        self.attempt = None
        self.in_attempt = 0  # tuples this Spark task attempt has applied

    def declare_output_fields(self, d):
        d.declare(["key", "count"])

    def execute(self, t):
        key, flag = t[0], t[1]
        self.counts[key] = self.counts.get(key, 0) + 1
        attempt = spark_attempt()
        if attempt != self.attempt:
            self.attempt, self.in_attempt = attempt, 0
        self.in_attempt += 1
        if flag == "crash" and attempt[2] == 0:
            crash_worker(self.marker, self.in_attempt, self.counts[key])
        self.c.emit([key, self.counts[key]], anchors=t)
        self.c.ack(t)


def test_stateful_task_crashing_mid_partition_resumes_from_its_last_kept_instance(spark_session, tmp_path):
    """The retried attempt must start from the instance kept after the previous wave: the counts
    the dead attempt had already applied are not applied twice, nor are earlier waves' lost."""
    crashes = tmp_path / "crashes.txt"
    feeder, tracker, acks = feeder_with_acks(["key", "flag"])
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("count", CountPerKey(str(crashes)), parallelism=2).fields_grouping("src", ["key"])
    b.set_bolt("sink", Sink()).shuffle_grouping("count")
    keys, per_key_per_round, crash_at = ["k0", "k1", "k2", "k3"], 3, (3, 2, "k1")
    key_of = []  # msg id -> key
    with LocalCluster(engine="spark", spark=spark_session, simulated_time=True, capture=True) as cluster:
        cluster.submit_topology("state", {}, b.create_topology())
        for rnd in range(6):
            for j in range(per_key_per_round):
                for key in keys:
                    feeder.feed([key, "crash" if (rnd, j, key) == crash_at else "-"], len(key_of))
                    key_of.append(key)
            cluster.wait_idle()
        coord = cluster.coordinator("state")
        emitted = [row for rows in coord.captured["count"]["default"].values() for row in rows]
    (crash,) = marker_lines(crashes)
    _, _, attempt, applied_in_attempt, count_at_crash = crash
    assert attempt == 0
    assert applied_in_attempt >= per_key_per_round  # mid-partition: k1's earlier tuples of the wave went first
    assert count_at_crash == crash_at[0] * per_key_per_round + crash_at[1] + 1  # it resumed earlier waves' counts
    assert sorted(acks) == list(range(len(key_of))) and not tracker.failed  # each tuple acked exactly once
    assert coord.lost_waves == 0
    acked_per_key = Counter(key_of[m] for m in acks)
    for key in keys:  # the counts are exactly the acked tuples: nothing lost, nothing applied twice
        assert sorted(n for k, n in emitted if k == key) == list(range(1, acked_per_key[key] + 1))


def test_poison_root_isolated_and_dead_lettered(spark_session, tmp_path):
    dlq = tmp_path / "dead.jsonl"
    spout = ReplayingFeeder(["v"])
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("work", PoisonGate(str(tmp_path / "crashes.txt")), parallelism=2).shuffle_grouping("src")
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


class Hoard(Bolt):
    """Keeps a large attribute (its State is ~2 MB), passes each tuple on anchored, acks it."""

    def prepare(self, conf, context, collector):
        self.c = collector
        self.ballast = os.urandom(2 << 20)

    def declare_output_fields(self, d):
        d.declare(["key"])

    def execute(self, t):
        self.c.emit([t[0]], anchors=t)
        self.c.ack(t)


def test_levels_holding_much_leave_their_states_behind(spark_session):
    """A level's small States travel with its output (no filtering pass); big ones (a middle
    level's and the last level's, ~2 MB each) are left out before the shuffle and the collect,
    and the topology runs the same."""
    feeder, tracker, _ = join_topology()
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("join", CountAndJoin(), parallelism=2).fields_grouping("src", ["key"])
    b.set_bolt("hoard", Hoard()).shuffle_grouping("join")
    b.set_bolt("last", Hoard()).shuffle_grouping("hoard")
    with LocalCluster(simulated_time=True, engine="spark", spark=spark_session, capture=True) as cluster:
        cluster.submit_topology("h", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1000}, b.create_topology())
        coord = cluster.coordinator("h")
        for rnd in range(3):
            for k in range(4):
                feeder.feed([f"k{k}", "right"], rnd * 4 + k)
            cluster.wait_idle()
        ex = coord.executor
        sizes = [ex._level_state_bytes(level) for level in (1, 2, 3)]  # noqa: SLF001 - what picks the path
        assert sizes[0] < STATE_SHUFFLE_BYTES < min(sizes[1:])
        assert sorted(tracker.acked) == list(range(12)) and not tracker.failed
        assert sum(len(v) for v in coord.captured["last"]["default"].values()) == 12
        # the last wave's job: the hoard level's ~2 MB State did not go into its shuffle to "last"
        sc = spark_session.sparkContext
        job = max(sc.statusTracker().getJobIdsForGroup(f"squall-{ex.uid[:8]}"))
        store = sc._jsc.sc().statusStore()
        stages = [int(x) for x in store.job(job).stageIds().mkString(",").split(",") if x]
        written = sum(store.lastStageAttempt(sid).shuffleWriteBytes() for sid in stages)
        assert 0 < written < STATE_SHUFFLE_BYTES


def test_shuffles_between_levels_take_the_java_serializer(spark_session):
    """A shuffle of (long, bytes) pairs typed as such gets Kryo, and every task then builds its
    own Kryo instance (jvm.py): a level's shuffle must be typed as objects."""
    from squall.engine.spark import worker

    feeder, tracker, _ = join_topology()
    b = TopologyBuilder()
    b.set_spout("src", feeder)
    b.set_bolt("join", CountAndJoin(), parallelism=2).fields_grouping("src", ["key"])
    b.set_bolt("sink", Sink()).shuffle_grouping("join")
    with LocalCluster(simulated_time=True, engine="spark", spark=spark_session) as cluster:
        cluster.submit_topology("j", {}, b.create_topology())
        feeder.feed(["k1", "right"], 1)
        cluster.wait_idle()
        ex = cluster.coordinator("j").executor
        shuffled = ex._jvm.shuffle(ex._state[0]._jrdd, 1, worker.LEVEL_PARTITIONERS[1])  # noqa: SLF001 - what it builds
        dep = shuffled.rdd().dependencies().head().rdd().dependencies().head()
        assert dep.serializer().getClass().getSimpleName() == "JavaSerializer"
        assert set(tracker.acked) == {1}
