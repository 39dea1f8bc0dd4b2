"""Storm's TopologyIntegrationTest and TestingTest scenarios, ported; each runs on both engines."""

from __future__ import annotations

from collections import Counter

import pytest

from squall import Config, InvalidTopologyException, LocalCluster, TopologyBuilder
from squall.testing import AckFailMapTracker, AckTracker, FeederSpout, complete_topology
from tests.support.components import (
    AckBolt,
    AckEveryOtherBolt,
    AggBolt,
    AggregatesCounter,
    BranchingBolt,
    DupAnchorBolt,
    EmitTaskIdBolt,
    GlobalCount,
    IdentityBolt,
    ResetTimeoutBolt,
    WordCounter,
    WordSpout,
)


def ms(rows):
    """Multiset of value lists (Storm's ms=)."""
    return Counter(tuple(r) for r in rows)


def run_complete(cluster_kwargs, topology, mocked, conf=None):
    return complete_topology(topology, mocked, conf=conf, engine=cluster_kwargs["engine"],
                             spark=cluster_kwargs.get("spark"))


def test_basic_topology(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("1", WordSpout(), parallelism=3)
    b.set_bolt("2", WordCounter(), parallelism=4).fields_grouping("1", ["word"])
    b.set_bolt("3", GlobalCount()).global_grouping("1")
    b.set_bolt("4", AggregatesCounter()).global_grouping("2")
    r = run_complete(cluster_kwargs, b.create_topology(), {"1": [["nathan"], ["bob"], ["joey"], ["nathan"]]})
    assert ms(r.emitted("1")) == ms([["nathan"], ["bob"], ["joey"], ["nathan"]])
    assert ms(r.emitted("2")) == ms([["nathan", 1], ["nathan", 2], ["bob", 1], ["joey", 1]])
    assert r.emitted("3") == [[1], [2], [3], [4]]
    assert r.emitted("4") == [[1], [2], [3], [4]]
    assert r.acked("1") == [0, 1, 2, 3]
    assert r.failed("1") == []


def test_all_grouping_over_six_tasks(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("1", WordSpout())
    b.set_bolt("2", EmitTaskIdBolt(), parallelism=6).all_grouping("1")
    r = run_complete(cluster_kwargs, b.create_topology(), {"1": [["a"]]})
    assert ms(r.emitted("2")) == ms([[0], [1], [2], [3], [4], [5]])
    assert r.acked("1") == [0]


def feeder_topology(bolt, grouping="global"):
    feeder = FeederSpout(["field1"])
    tracker = AckFailMapTracker()
    feeder.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("1", feeder)
    getattr(b.set_bolt("2", bolt), f"{grouping}_grouping")("1")
    return feeder, tracker, b.create_topology()


def test_timeout(cluster_kwargs):
    feeder, tracker, topo = feeder_topology(AckEveryOtherBolt())
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("timeout-tester", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, topo)
        cluster.advance_time(11)
        feeder.feed(["a"], 1)
        feeder.feed(["b"], 2)
        feeder.feed(["c"], 3)
        cluster.advance_time(9)
        assert tracker.is_acked(1) and tracker.is_acked(3)
        assert not tracker.is_failed(2)
        cluster.advance_time(12)
        assert tracker.is_failed(2)
        assert not tracker.is_acked(2)


def test_timeout_fires_between_one_and_two_timeouts(cluster_kwargs):
    feeder, tracker, topo = feeder_topology(AckEveryOtherBolt())
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, topo)
        feeder.feed(["a"], 1)
        feeder.feed(["b"], 2)
        cluster.advance_time(9.9)
        assert not tracker.is_failed(2)
        cluster.advance_time(10.2)  # 20.1 s: past 2x the timeout
        assert tracker.is_failed(2)


def test_reset_timeout(cluster_kwargs):
    feeder, tracker, topo = feeder_topology(ResetTimeoutBolt())
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("reset-timeout-tester", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10}, topo)
        feeder.feed(["a"], 1)
        feeder.feed(["b"], 2)
        cluster.advance_time(9)
        feeder.feed(["c"], 3)
        cluster.wait_idle()
        assert tracker.is_acked(3)
        cluster.advance_time(9)
        feeder.feed(["d"], 4)
        cluster.wait_idle()
        assert tracker.is_acked(4)
        cluster.advance_time(2)
        assert tracker.is_failed(2)
        feeder.feed(["e"], 5)
        cluster.wait_idle()
        assert tracker.is_acked(5)
        assert not tracker.is_failed(1)
        assert tracker.is_acked(1)


def test_disabled_timeouts(cluster_kwargs):
    feeder, tracker, topo = feeder_topology(AckEveryOtherBolt(), grouping="shuffle")
    conf = {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 10, Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: False}
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("disable-timeout-tester", conf, topo)
        feeder.feed(["a"], 1)
        feeder.feed(["b"], 2)
        feeder.feed(["c"], 3)
        cluster.advance_time(9)
        assert tracker.is_acked(1) and tracker.is_acked(3)
        assert not tracker.is_failed(2)
        cluster.advance_time(12)
        assert not tracker.is_failed(2)
        cluster.advance_time(1000)
        assert not tracker.is_failed(2) and not tracker.is_acked(2)


class Checker:
    """Storm's AckTrackingFeeder: assert the acks since the last check."""

    def __init__(self, fields=("num",)):
        self.feeder = FeederSpout(list(fields))
        self.tracker = AckTracker()
        self.feeder.set_ack_fail_delegate(self.tracker)

    def __call__(self, n):
        assert self.tracker.num_acks == n
        self.tracker.reset()


def test_acking_branching_join_multi_anchor(cluster_kwargs):
    c1, c2, c3 = Checker(), Checker(), Checker()
    b = TopologyBuilder()
    b.set_spout("1", c1.feeder)
    b.set_spout("2", c2.feeder)
    b.set_spout("3", c3.feeder)
    b.set_bolt("4", BranchingBolt(2)).shuffle_grouping("1")
    b.set_bolt("5", BranchingBolt(4)).shuffle_grouping("2")
    b.set_bolt("6", BranchingBolt(1)).shuffle_grouping("3")
    (b.set_bolt("7", AggBolt(3)).shuffle_grouping("4").shuffle_grouping("5").shuffle_grouping("6"))
    b.set_bolt("8", BranchingBolt(2)).shuffle_grouping("7")
    b.set_bolt("9", AckBolt()).shuffle_grouping("8")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("acking-test1", {}, b.create_topology())
        cluster.advance_time(11)
        c1.feeder.feed([1])
        cluster.wait_idle()
        c1(0)
        c2.feeder.feed([1])
        cluster.wait_idle()
        c1(1)
        c2(1)
        c1.feeder.feed([1])
        cluster.wait_idle()
        c1(0)
        c1.feeder.feed([1])
        cluster.wait_idle()
        c1(1)
        c3.feeder.feed([1])
        cluster.wait_idle()
        c1(0)
        c3(0)
        c2.feeder.feed([1])
        cluster.wait_idle()
        c1(1)
        c2(1)
        c3(1)


def test_ack_branching(cluster_kwargs):
    c = Checker()
    b = TopologyBuilder()
    b.set_spout("1", c.feeder)
    b.set_bolt("2", IdentityBolt()).shuffle_grouping("1")
    b.set_bolt("3", IdentityBolt()).shuffle_grouping("1")
    b.set_bolt("4", AggBolt(4)).shuffle_grouping("2").shuffle_grouping("3")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("test-acking2", {}, b.create_topology())
        cluster.advance_time(11)
        c.feeder.feed([1])
        cluster.wait_idle()
        c(0)
        c.feeder.feed([1])
        cluster.wait_idle()
        c(2)  # one output anchored to 4 inputs from 2 trees completes both


def test_acking_self_anchor(cluster_kwargs):
    c = Checker()
    b = TopologyBuilder()
    b.set_spout("1", c.feeder)
    b.set_bolt("2", DupAnchorBolt()).shuffle_grouping("1")
    b.set_bolt("3", AckBolt()).shuffle_grouping("2")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("test", {}, b.create_topology())
        cluster.advance_time(11)
        c.feeder.feed([1])
        cluster.wait_idle()
        c(1)
        c.feeder.feed([1])
        c.feeder.feed([1])
        c.feeder.feed([1])
        cluster.wait_idle()
        c(3)


def _counter_topology(source="1", fields=("word",), stream="default"):
    b = TopologyBuilder()
    b.set_spout("1", WordSpout(), parallelism=3)
    b.set_bolt("2", WordCounter(), parallelism=4).fields_grouping(source, list(fields), stream=stream)
    return b


def test_validate_topology_structure():
    _counter_topology().create_topology()  # valid
    with pytest.raises(InvalidTopologyException, match="unknown component '3'"):
        _counter_topology(source="3").create_topology()
    with pytest.raises(InvalidTopologyException, match="non-exists-field"):
        _counter_topology(fields=("non-exists-field",)).create_topology()
    with pytest.raises(InvalidTopologyException, match="non-exists-stream"):
        _counter_topology(stream="non-exists-stream").create_topology()


def test_validate_duplicate_ids_and_cycles():
    b = TopologyBuilder()
    b.set_spout("1", WordSpout())
    b.set_bolt("1", IdentityBolt()).shuffle_grouping("1")
    with pytest.raises(InvalidTopologyException, match="duplicate"):
        b.create_topology()
    b = TopologyBuilder()
    b.set_spout("s", WordSpout())
    b.set_bolt("a", IdentityBolt()).shuffle_grouping("s").shuffle_grouping("b")
    b.set_bolt("b", IdentityBolt()).shuffle_grouping("a")
    with pytest.raises(InvalidTopologyException, match="cycle"):
        b.create_topology()


def test_validate_direct_grouping_needs_direct_stream():
    b = TopologyBuilder()
    b.set_spout("1", WordSpout())
    b.set_bolt("2", IdentityBolt()).direct_grouping("1")
    with pytest.raises(InvalidTopologyException, match="direct"):
        b.create_topology()
