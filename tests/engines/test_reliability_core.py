"""squall's own promises on top of Storm's, and the API's error messages; both engines."""

from __future__ import annotations

import pytest

from squall import (
    BasicBolt,
    Bolt,
    Config,
    FailedException,
    LocalCluster,
    ReportedFailedException,
    Spout,
    TopologyBuilder,
)
from squall.testing import AckFailMapTracker, FeederSpout, complete_topology
from tests.support.components import AckBolt, IdentityBolt


class ReasonSpout(FeederSpout):
    """A feeder whose fail takes the reason."""

    def __init__(self, fields):
        super().__init__(fields)
        self.reasons = {}

    def fail(self, msg_id, reason=None):
        self.reasons[msg_id] = reason
        super().fail(msg_id)


class Explode(Bolt):
    """Raises on values starting with "bad"; passes the rest on, anchored."""

    def prepare(self, conf, context, collector):
        self.c = collector
        self.seen = 0

    def declare_output_fields(self, d):
        d.declare(["v"])

    def execute(self, t):
        self.seen += 1
        if str(t[0]).startswith("bad"):
            raise ValueError(f"cannot handle {t[0]}")
        self.c.emit([t[0]], anchors=t)
        self.c.ack(t)


def feeder_cluster(cluster_kwargs, bolt, spout=None, conf=None, second=None):
    spout = spout or ReasonSpout(["v"])
    tracker = AckFailMapTracker()
    spout.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("work", bolt, parallelism=2).shuffle_grouping("src")
    if second is not None:
        b.set_bolt("sink", second).shuffle_grouping("work")
    cluster = LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs)
    cluster.submit_topology("t", conf or {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, b.create_topology())
    return cluster, spout, tracker


def test_execute_exception_fails_only_its_tree_and_is_recorded(cluster_kwargs):
    cluster, spout, tracker = feeder_cluster(cluster_kwargs, Explode(), second=AckBolt())
    with cluster:
        for i in range(10):
            spout.feed([f"bad{i}" if i in (3, 7) else f"ok{i}"], i)
        cluster.wait_idle()
        assert sorted(tracker.acked) == [0, 1, 2, 4, 5, 6, 8, 9]
        assert sorted(tracker.failed) == [3, 7]
        errors = cluster.get_errors("t")
        assert len(errors) == 2
        e = errors[0]
        assert e.component == "work" and e.kind == "error"
        assert e.task in cluster.coordinator("t").topology.task_ids["work"]
        assert "ValueError: cannot handle bad" in e.error
        assert "Traceback" in e.traceback and "execute" in e.traceback
        assert e.values.startswith("['bad")
        assert cluster.get_topology_stats("t")["work"]["errors"] == 2
        reason = spout.reasons[3]
        assert reason.kind == "error" and reason.component == "work" and "cannot handle" in reason.error
        # the task goes on: more tuples after the errors are processed
        spout.feed(["ok-late"], 100)
        cluster.wait_idle()
        assert tracker.is_acked(100)


def test_fail_reasons_failed_and_timeout(cluster_kwargs):
    class FailOrHold(Bolt):
        def prepare(self, conf, context, collector):
            self.c = collector
            self.held = []

        def declare_output_fields(self, d):
            pass

        def execute(self, t):
            if t[0] == "fail":
                self.c.fail(t)
            else:
                self.held.append(t)

    cluster, spout, tracker = feeder_cluster(cluster_kwargs, FailOrHold())
    with cluster:
        spout.feed(["fail"], 1)
        spout.feed(["hold"], 2)
        cluster.wait_idle()
        r = spout.reasons[1]
        assert (r.kind, r.component) == ("failed", "work")
        assert r.task in cluster.coordinator("t").topology.task_ids["work"]
        assert 2 not in spout.reasons
        cluster.advance_time(21)
        assert spout.reasons[2].kind == "timeout"
        assert tracker.is_failed(2)


def test_execute_errors_in_basic_bolt(cluster_kwargs):
    class Basic(BasicBolt):
        def declare_output_fields(self, d):
            d.declare(["v"])

        def execute(self, t, c):
            if t[0] == "quiet":
                raise FailedException("no")
            if t[0] == "loud":
                raise ReportedFailedException("reported")
            if t[0] == "boom":
                raise KeyError("boom")
            c.emit([t[0]])

    cluster, spout, tracker = feeder_cluster(cluster_kwargs, Basic(), second=AckBolt())
    with cluster:
        for i, v in enumerate(["ok", "quiet", "loud", "boom", "ok2"]):
            spout.feed([v], i)
        cluster.wait_idle()
        assert sorted(tracker.acked) == [0, 4]
        assert sorted(tracker.failed) == [1, 2, 3]
        errors = cluster.get_errors("t")
        kinds = sorted((e.kind, e.error.split(":")[0]) for e in errors)
        assert kinds == [("error", "KeyError"), ("reported", "ReportedFailedException")]
        assert spout.reasons[3].kind == "error" and spout.reasons[1].kind == "failed"


class Hop(Bolt):
    """Holds each tree's tuple until a tick names this hop and that tree, then passes a child on
    (anchored; the last hop does not) and acks what it held. A tree walking a chain of hops
    acks one edge and adds the next at every tick: progress, in a later wave each time, with
    no `reset_timeout` anywhere."""

    def __init__(self, index: int, last: bool):
        self.index, self.last = index, last

    def prepare(self, conf, context, collector):
        self.c = collector
        self.held = {}

    def declare_output_fields(self, d):
        d.declare(["tree"])

    def execute(self, t):
        if t.source_component != "ticks":
            self.held[t[0]] = t
            return
        hop, tree = t[0], t[1]
        held = self.held.pop(tree, None) if hop == self.index else None
        if held is not None:
            if not self.last:
                self.c.emit([tree], anchors=held)
            self.c.ack(held)
        self.c.ack(t)


def test_timeout_counts_only_time_without_progress(cluster_kwargs):
    """Two trees wait in the same bolt. One moves a hop further every 8 s (each step under the
    10 s timeout, its whole walk 4x the timeout) and completes; the other makes no progress
    and times out between 1x and 2x the timeout, as Storm's rotating buckets promise."""
    timeout, step, hops = 10, 8, 5
    spout = ReasonSpout(["tree"])
    tracker = AckFailMapTracker()
    spout.set_ack_fail_delegate(tracker)
    ticks = FeederSpout(["hop", "tree"])
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_spout("ticks", ticks)
    upstream = "src"
    for k in range(1, hops + 1):
        b.set_bolt(f"hop{k}", Hop(k, last=k == hops)).shuffle_grouping(upstream).all_grouping("ticks")
        upstream = f"hop{k}"
    idle_failed_at = None
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: timeout}, b.create_topology())
        spout.feed(["live"], "live")
        spout.feed(["idle"], "idle")
        cluster.wait_idle()
        for k in range(1, hops + 1):
            cluster.advance_time(step)
            if idle_failed_at is None and tracker.is_failed("idle"):
                idle_failed_at = k * step
            assert not tracker.is_failed("live"), f"the progressing tree timed out before hop {k}"
            ticks.feed([k, "live"])
            cluster.wait_idle()
        stats = cluster.get_topology_stats("t")
    assert tracker.is_acked("live") and "live" not in spout.reasons
    assert [stats[f"hop{k}"]["emitted"] for k in range(1, hops + 1)] == [1] * (hops - 1) + [0]  # it walked
    assert hops * step > 2 * timeout  # its whole walk took longer than any timeout could allow
    assert spout.reasons["idle"].kind == "timeout" and not tracker.is_acked("idle")
    assert timeout <= idle_failed_at <= 2 * timeout + step  # seen at the first check after it expired


def test_double_ack_reported_once_as_user_error(cluster_kwargs):
    class DoubleAck(Bolt):
        def prepare(self, conf, context, collector):
            self.c = collector

        def declare_output_fields(self, d):
            pass

        def execute(self, t):
            self.c.ack(t)
            self.c.ack(t)
            self.c.fail(t)

    cluster, spout, tracker = feeder_cluster(cluster_kwargs, DoubleAck())
    with cluster:
        spout.feed(["x"], 1)
        cluster.wait_idle()
        assert tracker.is_acked(1) and not tracker.is_failed(1)
        user = [e for e in cluster.get_errors("t") if e.kind == "user"]
        assert len(user) == 2
        assert "already acked" in user[0].error


def test_stream_without_subscribers_acks_at_once(engine, cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("src", FeederSpout(["v"]))
    r = complete_topology(b.create_topology(), {"src": [["a"], ["b"]]}, engine=engine,
                          spark=cluster_kwargs.get("spark"))
    assert r.acked("src") == [0, 1]


def test_zero_ackers_acks_right_after_emit_and_never_fails(cluster_kwargs):
    class Fails(Bolt):
        def prepare(self, conf, context, collector):
            self.c = collector

        def declare_output_fields(self, d):
            pass

        def execute(self, t):
            self.c.fail(t)

    cluster, spout, tracker = feeder_cluster(cluster_kwargs, Fails(), conf={Config.TOPOLOGY_ACKER_EXECUTORS: 0})
    with cluster:
        spout.feed(["x"], 1)
        cluster.wait_idle()
        assert tracker.is_acked(1) and not tracker.is_failed(1)
        assert cluster.get_topology_stats("t")["src"]["acked"] == 1  # counted, as Storm counts it
        cluster.advance_time(100)
        assert not tracker.is_failed(1)


def test_untracked_emits(cluster_kwargs):
    """A spout emit without msg id and a bolt emit without anchors are not tracked."""

    class Unanchored(Bolt):
        def prepare(self, conf, context, collector):
            self.c = collector

        def declare_output_fields(self, d):
            d.declare(["v"])

        def execute(self, t):
            self.c.emit([t[0]])  # not anchored: the downstream never-acker does not hold the tree
            self.c.ack(t)

    class Never(Bolt):
        def prepare(self, conf, context, collector):
            self.n = 0

        def declare_output_fields(self, d):
            pass

        def execute(self, t):
            self.n += 1

    cluster, spout, tracker = feeder_cluster(cluster_kwargs, Unanchored(), second=Never())
    with cluster:
        spout.feed(["x"], 1)
        cluster.wait_idle()
        assert tracker.is_acked(1)
        assert cluster.get_topology_stats("t")["sink"]["executed"] == 1


class CountingSpout(Spout):
    """Emits 0, 1, 2, ... with msg ids; remembers what was acked."""

    def __init__(self, limit=None, tracked=True):
        self.limit, self.tracked = limit, tracked

    def declare_output_fields(self, d):
        d.declare(["n"])

    def open(self, conf, context, collector):
        self.c = collector
        self.i = 0
        self.acked = []

    def next_tuple(self):
        if self.limit is not None and self.i >= self.limit:
            return
        self.c.emit([self.i], msg_id=self.i if self.tracked else None)
        self.i += 1

    def ack(self, msg_id):
        self.acked.append(msg_id)


def test_max_spout_pending_bounds_pending_trees(cluster_kwargs):
    class Hold(Bolt):
        def prepare(self, conf, context, collector):
            self.c = collector
            self.held = []

        def declare_output_fields(self, d):
            pass

        def execute(self, t):
            self.held.append(t)

    b = TopologyBuilder()
    b.set_spout("src", CountingSpout(), parallelism=2)
    b.set_bolt("hold", Hold()).shuffle_grouping("src")
    conf = {Config.TOPOLOGY_MAX_SPOUT_PENDING: 7, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1000}
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", conf, b.create_topology())
        cluster.wait_idle()
        coord = cluster.coordinator("t")
        assert coord.pending_count == 14  # 7 per spout task
        assert cluster.get_topology_stats("t")["src"]["emitted"] == 14


class BadEmitter(Bolt):
    def __init__(self, mode):
        self.mode = mode

    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        d.declare(["a", "b"])

    def execute(self, t):
        if self.mode == "stream":
            self.c.emit([1, 2], anchors=t, stream="nope")
        elif self.mode == "arity":
            self.c.emit([1], anchors=t)
        elif self.mode == "anchor":
            self.c.emit([1, 2], anchors="not a tuple")
        elif self.mode == "values":
            self.c.emit("ab", anchors=t)
        self.c.ack(t)


@pytest.mark.parametrize("mode,message", [
    ("stream", "emitted on stream 'nope', which it does not declare; declared streams: ['default']"),
    ("arity", "emitted 1 value(s) [1] on stream 'default', which declares 2 field(s) ['a', 'b']"),
    ("anchor", "anchors must be an input Tuple or a list of them"),
    ("values", "values must be a list"),
])
def test_bad_emits_fail_the_input_with_a_clear_error(cluster_kwargs, mode, message):
    cluster, spout, tracker = feeder_cluster(cluster_kwargs, BadEmitter(mode))
    with cluster:
        spout.feed(["x"], 1)
        cluster.wait_idle()
        assert tracker.is_failed(1)
        (err,) = cluster.get_errors("t")
        assert message in err.error
        assert err.component == "work"


def test_stats_per_component(cluster_kwargs):
    cluster, spout, tracker = feeder_cluster(cluster_kwargs, IdentityBolt(), second=AckBolt())
    with cluster:
        for i in range(5):
            spout.feed([i], i)
        cluster.wait_idle()
        s = cluster.get_topology_stats("t")
        assert s["src"]["emitted"] == 5 and s["src"]["acked"] == 5 and s["src"]["failed"] == 0
        assert s["src"]["complete_latency_ms"] is not None
        assert s["work"]["executed"] == 5 and s["work"]["emitted"] == 5 and s["work"]["acked"] == 5
        assert s["work"]["execute_latency_ms"] >= 0
        assert s["sink"]["executed"] == 5 and s["sink"]["acked"] == 5


def test_real_time_cluster_runs_and_waits_idle(cluster_kwargs):
    spout = FeederSpout(["v"])
    tracker = AckFailMapTracker()
    spout.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("work", IdentityBolt(), parallelism=2).shuffle_grouping("src")
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("rt", {}, b.create_topology())
        for i in range(20):
            spout.feed([i], i)
        cluster.wait_idle(timeout_secs=60)
        assert sorted(tracker.acked) == list(range(20))


class Lifecycle(CountingSpout):
    """Writes each lifecycle call to a file: the test reads it wherever the spout task runs."""

    def __init__(self, limit, path):
        super().__init__(limit=limit)
        self.path = str(path)

    def _call(self, name):
        with open(self.path, "a") as f:
            f.write(name + "\n")

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self._call("open")

    def activate(self):
        self._call("activate")

    def deactivate(self):
        self._call("deactivate")

    def close(self):
        self._call("close")


def test_spout_lifecycle_and_kill_with_wait(cluster_kwargs, tmp_path):
    calls = tmp_path / "calls"
    b = TopologyBuilder()
    b.set_spout("src", Lifecycle(3, calls))
    b.set_bolt("sink", IdentityBolt()).shuffle_grouping("src")
    cluster = LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs)
    cluster.submit_topology("t", {}, b.create_topology())
    cluster.deactivate("t")
    cluster.advance_time(1)
    assert cluster.spout_instances("t", "src")[0].i == 0  # a deactivated spout is not asked for tuples
    cluster.activate("t")
    cluster.advance_time(1)
    assert cluster.spout_instances("t", "src")[0].acked == [0, 1, 2]
    cluster.kill_topology("t", wait_secs=2)
    assert calls.read_text().split() == ["open", "activate", "deactivate", "activate", "deactivate", "close"]
