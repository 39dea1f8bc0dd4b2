"""What bad input gets, row by row (the README's table "What bad input gets"), on both engines:
which tuples are acked and failed, why, and the error record that names the culprit. Each test
asserts the same literal outcome whatever the engine, so the engines agree. The unpicklable
emitted value has tests of its own. Last, on Spark only: a lost wave's Java traces go to
Spark's log file, not to the console, unless --spark-log-level asks for them."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from squall import (
    BasicBolt,
    Bolt,
    Config,
    FailedException,
    InvalidTopologyException,
    LocalCluster,
    ReportedFailedException,
    Spout,
    TopologyBuilder,
)
from squall.cli import spark_log_level
from squall.observe.errors import ErrorRecord
from squall.testing import FeederSpout
from squall.trident import CombinerAggregator, FixedBatchSpout, SQLiteMapState, TridentTopology
from tests.support.components import AckBolt

SEEN = "seen"  # every input is first reported on this stream, so a test knows which task ran it
CRASH_TOPOLOGY = Path(__file__).resolve().parents[1] / "support" / "crash_topology.py"


class ReasonSpout(FeederSpout):
    """A feeder that remembers what was acked, and what failed with which reason."""

    def __init__(self, fields):
        super().__init__(fields)
        self.acked, self.reasons = set(), {}

    def ack(self, msg_id):
        self.acked.add(msg_id)

    def fail(self, msg_id, reason=None):
        self.reasons[msg_id] = reason


class Misbehave(Bolt):
    """Passes tuples on, anchored, and acks them; misbehaves when the value says how."""

    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        d.declare(["v"])
        d.declare(["v"], stream=SEEN)

    def execute(self, t):
        v = t[0]
        self.c.emit([v], stream=SEEN)
        if v == "raise":
            raise ValueError(f"cannot handle {v}")
        if v == "arity":
            self.c.emit([v, 2], anchors=t)
        if v == "stream":
            self.c.emit([v], anchors=t, stream="nope")
        self.c.emit([v], anchors=t)
        self.c.ack(t)


class Refuse(BasicBolt):
    """Storm's BasicBolt failures: FailedException fails quietly, ReportedFailedException is reported."""

    def declare_output_fields(self, d):
        d.declare(["v"])
        d.declare(["v"], stream=SEEN)

    def execute(self, t, collector):
        collector.emit([t[0]], stream=SEEN)
        if t[0] == "quiet":
            raise FailedException("quiet")
        if t[0] == "loud":
            raise ReportedFailedException("loud")
        collector.emit([t[0]])


@dataclass
class Outcome:
    acked: set
    reasons: dict  # msg id -> FailReason
    errors: list[ErrorRecord]
    ran_on: dict  # value -> the task that executed it
    work_tasks: list[int]


def run_bolt(cluster_kwargs, bolt, values) -> Outcome:
    """Feed `values` (msg id = position) through src -> work (2 tasks) -> sink; wait until idle."""
    spout = ReasonSpout(["v"])
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("work", bolt, parallelism=2).shuffle_grouping("src")
    b.set_bolt("sink", AckBolt()).shuffle_grouping("work")
    with LocalCluster(simulated_time=True, stepped=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, b.create_topology())
        for i, v in enumerate(values):
            spout.feed([v], i)
        cluster.wait_idle()
        coord = cluster.coordinator("t")
        seen = coord.captured.get("work", {}).get(SEEN, {})
        ran_on = {vals[0]: task for task, rows in seen.items() for vals in rows}
        assert sorted(ran_on) == sorted(values)  # every input ran, each on one task
        return Outcome(spout.acked, spout.reasons, cluster.get_errors("t"), ran_on,
                       coord.topology.task_ids["work"])


def only_error(out: Outcome) -> ErrorRecord:
    (err,) = out.errors
    return err


# -- bolts ---------------------------------------------------------------------------------------


def test_exception_in_execute_fails_only_its_tree(cluster_kwargs):
    out = run_bolt(cluster_kwargs, Misbehave(), ["ok0", "raise", "ok2"])
    assert out.acked == {0, 2}
    assert set(out.reasons) == {1}
    err = only_error(out)
    assert (err.component, err.task, err.kind) == ("work", out.ran_on["raise"], "error")
    assert err.error == "ValueError: cannot handle raise"
    assert err.values == "['raise']"
    assert "Traceback" in err.traceback and "in execute" in err.traceback
    why = out.reasons[1]
    assert (why.kind, why.component, why.task) == ("error", "work", out.ran_on["raise"])
    assert why.error == "ValueError: cannot handle raise"


def test_failed_exception_fails_quietly_and_reported_failed_exception_is_recorded(cluster_kwargs):
    out = run_bolt(cluster_kwargs, Refuse(), ["ok", "quiet", "loud"])
    assert out.acked == {0}
    assert set(out.reasons) == {1, 2}
    assert out.reasons[1].kind == "failed" and out.reasons[2].kind == "failed"
    err = only_error(out)  # nothing for the quiet one
    assert (err.component, err.task, err.kind) == ("work", out.ran_on["loud"], "reported")
    assert err.error == "ReportedFailedException: loud"


@pytest.mark.parametrize("mode,message", [
    ("arity", "ValueError: component 'work' emitted 2 value(s) ['arity', 2] on stream 'default', "
              "which declares 1 field(s) ['v']"),
    ("stream", "UndeclaredStreamError: component 'work' emitted on stream 'nope', which it does not declare; "
               "declared streams: ['default', 'seen']. Declare it in declare_output_fields"),
])
def test_bad_emit_fails_its_input_with_an_error_naming_the_fix(cluster_kwargs, mode, message):
    out = run_bolt(cluster_kwargs, Misbehave(), ["ok0", mode, "ok2"])
    assert out.acked == {0, 2}
    assert set(out.reasons) == {1}
    err = only_error(out)
    assert (err.component, err.task, err.kind) == ("work", out.ran_on[mode], "error")
    assert err.error.startswith(message)
    assert err.values == f"[{mode!r}]"
    assert out.reasons[1].kind == "error"


# -- components that cannot be copied to their tasks ----------------------------------------------


class Conn:
    def __init__(self):
        self.host = "db"
        self.lock = threading.Lock()


class Holding(Bolt):
    """A bolt that makes in __init__ what belongs in prepare()."""

    def __init__(self, **attrs):
        self.batch = [1, 2, 3]
        self.__dict__.update(attrs)

    def declare_output_fields(self, d):
        pass

    def execute(self, t):
        pass


class LockedSpout(Spout):
    def __init__(self):
        self.lock = threading.RLock()

    def declare_output_fields(self, d):
        d.declare(["v"])


def submit_refused(cluster_kwargs, spout, bolt) -> str:
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("work", bolt).shuffle_grouping("src")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        with pytest.raises(InvalidTopologyException) as got:
            cluster.submit_topology("t", {}, b.create_topology())
        assert cluster.topology_names() == []  # nothing started
    return str(got.value)


@pytest.mark.parametrize("attrs,path,type_name", [
    ({"lock": threading.Lock()}, "self.lock", "_thread.lock"),
    ({"conn": Conn()}, "self.conn.lock", "_thread.lock"),
    ({"options": {"rows": (i for i in range(3))}}, "self.options['rows']", "generator"),
    ({"codec": json}, "self.codec", "module"),  # cloudpickle takes it, but each Spark task deep-copies
], ids=["lock", "nested", "generator", "module"])
def test_a_bolt_that_cannot_be_copied_is_refused_at_submit(cluster_kwargs, attrs, path, type_name):
    msg = submit_refused(cluster_kwargs, FeederSpout(["v"]), Holding(**attrs))
    assert msg.startswith(f"bolt 'work' cannot be copied to its tasks: its attribute {path} holds a {type_name},")
    assert "Create it in prepare() instead of __init__" in msg
    assert "TypeError: cannot pickle" in msg


def test_a_spout_that_cannot_be_copied_is_refused_at_submit(cluster_kwargs):
    msg = submit_refused(cluster_kwargs, LockedSpout(), AckBolt())
    assert msg.startswith("spout 'src' cannot be copied to its tasks: its attribute self.lock holds a _thread.RLock,")
    assert "spouts run on the driver" in msg
    assert "Create it in open() instead of __init__" in msg


class LockOutOfCopies(Misbehave):
    """Holds a lock from __init__ but leaves it out of its copies, and each copy makes its own:
    accepted, and it runs."""

    def __init__(self):
        self.lock = threading.Lock()

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "lock"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.lock = threading.Lock()

    def execute(self, t):
        with self.lock:
            super().execute(t)


def test_a_component_whose_copies_leave_the_lock_out_still_runs(cluster_kwargs):
    out = run_bolt(cluster_kwargs, LockOutOfCopies(), ["a", "b", "c"])
    assert out.acked == {0, 1, 2}
    assert out.errors == [] and out.reasons == {}


# -- spouts --------------------------------------------------------------------------------------


class ScriptedSpout(Spout):
    """Emits 1..6 (msg id = value), one per next_tuple call; raises instead of emitting
    `raise_at`, emits `bad_stream_at` on a stream it does not declare."""

    def __init__(self, raise_at=None, bad_stream_at=None):
        self.raise_at, self.bad_stream_at = raise_at, bad_stream_at

    def declare_output_fields(self, d):
        d.declare(["v"])

    def open(self, conf, context, collector):
        self.c, self.n, self.acked, self.failed = collector, 0, set(), set()

    def next_tuple(self):
        if self.n == 6:
            return
        self.n += 1
        if self.n == self.raise_at:
            raise RuntimeError(f"source broke at {self.n}")
        self.c.emit([self.n], msg_id=self.n, stream="nope" if self.n == self.bad_stream_at else "default")

    def ack(self, msg_id):
        self.acked.add(msg_id)

    def fail(self, msg_id):
        self.failed.add(msg_id)


@pytest.mark.parametrize("script,message", [
    ({"raise_at": 3}, "RuntimeError: source broke at 3"),
    ({"bad_stream_at": 3}, "UndeclaredStreamError: component 'src' emitted on stream 'nope', which it does not "
                           "declare; declared streams: ['default']"),
], ids=["raises", "undeclared-stream"])
def test_a_spout_error_skips_that_tuple_and_the_spout_goes_on(cluster_kwargs, script, message):
    b = TopologyBuilder()
    b.set_spout("src", ScriptedSpout(**script))
    b.set_bolt("sink", AckBolt()).shuffle_grouping("src")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", {}, b.create_topology())
        cluster.wait_idle()
        spout = cluster.spout_instances("t")[0]
        assert spout.acked == {1, 2, 4, 5, 6}  # 3 was never emitted
        assert spout.failed == set()
        (err,) = cluster.get_errors("t")
        assert (err.component, err.task, err.kind, err.values) == (
            "src", cluster.coordinator("t").topology.task_ids["src"][0], "error", None)
        assert err.error.startswith(message)
        assert "in next_tuple" in err.traceback
        assert cluster.get_topology_stats("t")["src"]["errors"] == 1


# -- Trident: a state value that cannot be stored ---------------------------------------------------


class AsSet(CombinerAggregator):
    """Combines into a set, which a SQLite map state (JSON) cannot store."""

    def init(self, t):
        return {t[0]}

    def combine(self, a, b):
        return a | b

    def zero(self):
        return set()


def test_a_state_value_that_cannot_be_stored_fails_the_commit_and_is_retried(cluster_kwargs, tmp_path):
    """The batch's tree completes, its commit fails on the state task, nothing is written, and
    the commit is retried every wave: later batches wait (txids commit in order). Run a fixed
    number of waves, since such a topology never becomes idle."""
    t = TridentTopology()
    factory = SQLiteMapState.factory(str(tmp_path / "sets.db"), "transactional")
    sets = (t.new_stream("words", FixedBatchSpout(["w"], 2, ["a"], ["b"], ["c"]))
            .group_by(["w"]).persistent_aggregate(factory, AsSet(), ["set"]))
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("tr", {Config.SQUALL_WAVES_IN_FLIGHT: 1}, t.build())  # each run_wave settles its wave
        coord = cluster.coordinator("tr")
        waves = 6
        for _ in range(waves):
            coord.run_wave()
        stats = cluster.get_topology_stats("tr")
        (state,) = [c for c in stats if c.endswith("-state0")]
        errors = cluster.get_errors("tr")
        assert len(errors) == waves - 1  # wave 1 runs the batch; every later one tries its commit
        assert {(e.component, e.kind, e.values) for e in errors} == {(state, "error", "[(1, 0)]")}
        (said,) = {e.error for e in errors}  # the same error each time: the key, the cause, what to do
        assert re.match(r'TypeError: the state cannot store the value for key \["[ab]"\]:', said), said
        assert "Object of type set is not JSON serializable" in said and "return numbers, strings" in said
        assert stats["words"]["acked"] == 1 and stats["words"]["failed"] == waves - 1
        assert cluster.spout_instances("tr")[0].committed == 0
        assert sets.multi_get([["a"], ["b"], ["c"]]) == [None, None, None]


# -- Spark's own logs ------------------------------------------------------------------------------


def squall_run(*extra: str) -> tuple[str, str]:
    """`squall run` on the crash topology, in a process of its own (a fresh JVM); its stdout
    (with whitespace from line wrapping folded) and stderr."""
    cmd = [sys.executable, "-m", "squall.cli", "run", str(CRASH_TOPOLOGY), "--spark", "local[1,2]",
           "--seconds", "300", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "160"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the topology finished its input" in done.stdout
    return " ".join(done.stdout.split()), done.stderr


@pytest.mark.spark
def test_a_lost_wave_keeps_java_traces_off_the_console_and_names_the_log_file():
    out, err = squall_run("-v")  # -v: squall's warnings, one per lost wave, on the console
    console = out + err
    assert "TaskSetManager" not in console and "at org.apache" not in console and "Executor:" not in console
    lost = re.findall(r"wave lost \(1 roots\): ([^;]*); full Spark log: (\S+\.log)", out)
    assert len(lost) == 1, out
    live = console.split("topology 'crash_topology' after")[0]  # the lines before the final report
    assert "lost in __wave" not in live, live  # said once, not again as an error record
    error, path = lost[0]
    assert "Python worker exited unexpectedly" in error
    assert f"Spark's own logs go to {path}" in out
    assert f"1 wave(s) lost; Spark's full traces are in {path}" in out
    log = Path(path).read_text()
    Path(path).unlink()  # this run's file
    assert "ERROR TaskSetManager: Task 0 in stage" in log and "aborting job" in log
    assert "at org.apache.spark" in log and "Python worker exited unexpectedly" in log


def test_spark_log_level_comes_from_the_flag_else_the_topology_conf():
    def level(flag, conf):
        return spark_log_level(argparse.Namespace(spark_log_level=flag), conf)

    assert level(None, {}) is None  # to the file
    assert level(None, {Config.SQUALL_SPARK_LOG_LEVEL: "INFO"}) == "INFO"
    assert level("WARN", {Config.SQUALL_SPARK_LOG_LEVEL: "INFO"}) == "WARN"


@pytest.mark.spark
def test_spark_log_level_puts_sparks_logs_back_on_the_console():
    out, err = squall_run("--spark-log-level", "WARN")
    assert "WARN TaskSetManager: Lost task" in err and "at org.apache.spark" in err
    assert "full Spark log" not in out and "Spark's own logs go to" not in out
    assert "wave(s) lost;" not in out  # no file to point to


class PrepareRaisesOnce(Bolt):
    """prepare() raises the first time each task tries; the next wave it works."""

    def declare_output_fields(self, d):
        pass

    def prepare(self, conf, context, collector):
        self.collector = collector
        if not getattr(self, "failed_once", False):
            self.failed_once = True
            raise RuntimeError("cannot connect yet")

    def execute(self, t):
        self.collector.ack(t)


def test_prepare_raising_fails_that_wave_s_inputs_then_retries(cluster_kwargs):
    """Both engines: the first wave's tuples fail with the prepare error; prepare runs again
    with the next input, and the replays are acked."""
    from squall.testing import AckFailMapTracker, FeederSpout

    spout = FeederSpout(["n"])
    tracker = AckFailMapTracker()
    spout.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("feed", spout)
    b.set_bolt("flaky", PrepareRaisesOnce()).shuffle_grouping("feed")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", {}, b.create_topology())
        for i in range(3):
            spout.feed([i], msg_id=i)
        cluster.advance_time(1)
        assert [tracker.is_failed(i) for i in range(3)] == [True] * 3
        errors = cluster.get_errors("t")
        assert [(e.component, e.kind) for e in errors] == [("flaky", "error")]
        assert "RuntimeError: cannot connect yet" in errors[0].error
        spout.feed([3], msg_id=3)
        cluster.advance_time(1)
        assert tracker.is_acked(3)
