"""What a windowed bolt does with bad input and bad configuration: clear errors naming the
component; a bad tuple costs only itself; both engines."""

from __future__ import annotations

import pytest

from squall import Config, InvalidTopologyException, LocalCluster, TopologyBuilder
from squall.testing import FeederSpout
from squall.windowing import BaseWindowedBolt, Count, Duration
from tests.windowing.helpers import Recorder, Sink, windowed_cluster, windows


def build(bolt, conf=None):
    b = TopologyBuilder()
    b.set_spout("src", FeederSpout(["id", "ts"]))
    b.set_bolt("win", bolt).global_grouping("src")
    return b


def test_window_shorter_than_its_interval_is_refused_naming_the_bolt():
    with pytest.raises(InvalidTopologyException, match=r"windowed bolt 'win'.*Count\(2\).*shorter.*Count\(5\)"):
        build(Recorder().with_window(Count(2), Count(5)))
    with pytest.raises(InvalidTopologyException, match=r"'win'.*Duration\(1 s\).*shorter.*Duration\(3 s\)"):
        build(Recorder().with_window(Duration(1), Duration(3)))


def test_a_bolt_without_a_window_is_refused():
    with pytest.raises(InvalidTopologyException, match="'win': no window set"):
        build(Recorder())


def test_bad_lengths_are_refused_where_they_are_written():
    with pytest.raises(TypeError, match="Count\\(n\\) or Duration"):
        Recorder().with_window(10)
    with pytest.raises(ValueError, match="Count needs"):
        Count(0)
    with pytest.raises(ValueError, match="Duration needs"):
        Duration("5s")


def test_window_longer_than_the_message_timeout_is_refused():
    # at create_topology against the default (30 s)...
    with pytest.raises(InvalidTopologyException, match=r"'win'.*= 40 s exceeds topology.message.timeout.secs = 30"):
        build(Recorder().with_window(Duration(30), Duration(10))).create_topology()
    # ... and at submit against the topology's conf
    topology = build(Recorder().with_window(Duration(8), Duration(4))).create_topology()
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        with pytest.raises(InvalidTopologyException, match="= 12 s exceeds topology.message.timeout.secs = 10"):
            cluster.submit_topology("w", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, topology)


def test_count_window_beyond_max_spout_pending_is_refused():
    topology = build(Recorder().with_window(Count(100), Count(10))).create_topology()
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        with pytest.raises(InvalidTopologyException,
                           match=r"110 tuples exceeds what its 1 spout task\(s\) may have pending"):
            cluster.submit_topology("w", {Config.TOPOLOGY_MAX_SPOUT_PENDING: 50}, topology)


def test_late_stream_needs_event_time():
    with pytest.raises(InvalidTopologyException, match="with_late_tuple_stream needs event time"):
        build(Recorder().with_tumbling_window(Duration(5)).with_late_tuple_stream("late"))


def test_non_numeric_timestamp_fails_that_tuple_only(cluster_kwargs):
    bolt = Recorder().with_timestamp_field("ts").with_tumbling_window(Duration(5))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, fields=("id", "ts"), sink=Sink())
    with cluster:
        for values in (["a", 1000], ["bad", "yesterday"], ["none", None], ["b", 2000]):
            spout.feed(values, values[0])
        cluster.wait_idle()
        assert sorted(tracker.failed) == ["bad", "none"]
        errors = cluster.get_errors("w")
        assert len(errors) == 2
        assert all(e.component == "win" for e in errors)
        assert "timestamp field 'ts' is 'yesterday' (str), not a number" in errors[0].error
        spout.feed(["c", 9000], "c")
        cluster.advance_time(1)  # the watermark timer: 9 s, the window ending at 5 s fires
        assert [w[0] for w in windows(cluster)] == [["a", "b"]]
        assert {"a", "b"} <= set(tracker.acked)


class Raises(BaseWindowedBolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, d):
        d.declare(["n"])

    def execute(self, window):
        if any(t["id"] == "boom" for t in window.get()):
            raise RuntimeError("cannot sum this window")
        self.collector.emit([len(window)])


def test_a_window_whose_execute_raises_fails_its_tuples_and_the_bolt_goes_on(cluster_kwargs):
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, Raises().with_tumbling_window(Count(2)), sink=Sink())
    with cluster:
        for i in ("a", "boom", "c", "d"):
            spout.feed([i], i)
        cluster.wait_idle()
        assert sorted(tracker.failed) == ["a", "boom"]
        assert sorted(tracker.acked) == ["c", "d"]
        errors = cluster.get_errors("w")
        assert len(errors) == 1 and errors[0].component == "win"
        assert "RuntimeError: cannot sum this window" in errors[0].error


def test_a_batch_the_window_cannot_hold_fails_its_tuples_with_one_error(monkeypatch):
    """If holding a batch fails inside squall (here: the store refuses it), the batch's tuples
    fail at once, with one error for the batch, and the bolt takes later batches."""
    from squall.reliability.held import HeldStore

    real = HeldStore.add_batch
    refuse = {"bad"}

    def add_batch(self, batch, seq0, ts):
        if any(v[0] in refuse for v in batch.values):
            raise MemoryError("no room for this batch")
        return real(self, batch, seq0, ts)

    monkeypatch.setattr(HeldStore, "add_batch", add_batch)
    cluster, spout, tracker = windowed_cluster({"engine": "local"}, Recorder().with_tumbling_window(Count(2)),
                                               sink=Sink())
    with cluster:
        for i in ("a", "bad"):
            spout.feed([i], i)
        cluster.wait_idle()
        for i in ("c", "d"):
            spout.feed([i], i)
        cluster.wait_idle()
        assert sorted(tracker.failed) == ["a", "bad"]
        assert sorted(tracker.acked) == ["c", "d"]
        errors = cluster.get_errors("w")
        assert len(errors) == 1 and errors[0].component == "win"
        assert "MemoryError: no room for this batch" in errors[0].error
        assert "a batch of 2 row(s)" in str(errors[0].values)
