"""A spout that defines ack_batch gets a wave's completed msg ids in one call per task, never
`ack` one by one; if ack_batch raises, one error says so and the topology goes on; both engines."""

from __future__ import annotations

from squall import Config, LocalCluster, TopologyBuilder
from squall.testing import FeederSpout
from tests.support.components import AckBolt, IdentityBolt


class BatchAckSpout(FeederSpout):
    """A feeder that settles acks in batches, and fails the ones whose id is odd."""

    def __init__(self, fields, raise_on=None):
        super().__init__(fields)
        self.raise_on = raise_on
        self.record = {"batches": [], "single": [], "failed": []}

    def __deepcopy__(self, memo):  # the task's spout is this one: the test reads its record
        return self

    def ack(self, msg_id):
        self.record["single"].append(msg_id)

    def ack_batch(self, msg_ids):
        self.record["batches"].append(list(msg_ids))
        if self.raise_on is not None and self.raise_on in msg_ids:
            raise RuntimeError("the broker is gone")

    def fail(self, msg_id):
        self.record["failed"].append(msg_id)


class FailOdd(IdentityBolt):
    def execute(self, t):
        if t[0] % 2:
            self.collector.fail(t)
        else:
            super().execute(t)


def run(cluster_kwargs, spout, n=40, per_wave=10):
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("mid", FailOdd(), parallelism=2).shuffle_grouping("src")
    b.set_bolt("sink", AckBolt()).shuffle_grouping("mid")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 1000,
                                      Config.SQUALL_WAVE_MAX_TUPLES: per_wave}, b.create_topology())
        for i in range(n):
            spout.feed([i], i)
        cluster.wait_idle()
        return cluster.get_errors("t")


def test_acks_arrive_as_one_batch_per_wave_and_fails_one_by_one(cluster_kwargs):
    spout = BatchAckSpout(["num"])
    errors = run(cluster_kwargs, spout)
    rec = spout.record
    acked = [m for batch in rec["batches"] for m in batch]
    assert sorted(acked) == list(range(0, 40, 2))  # each completed tree once
    assert len(rec["batches"]) >= 4 and all(rec["batches"])  # 10 tuples a wave: a batch per wave
    assert rec["single"] == []
    assert sorted(rec["failed"]) == list(range(1, 40, 2))
    assert errors == []


def test_a_raising_ack_batch_is_one_error_and_the_topology_goes_on(cluster_kwargs):
    spout = BatchAckSpout(["num"], raise_on=10)
    errors = run(cluster_kwargs, spout)
    acked = sorted(m for batch in spout.record["batches"] for m in batch)
    assert acked == list(range(0, 40, 2))
    assert len(errors) == 1 and errors[0].component == "src"
    assert "RuntimeError: the broker is gone" in errors[0].error and "ack_batch of" in str(errors[0].values)


def test_without_ackers_a_waves_msg_ids_are_acked_in_one_batch_as_emitted(cluster_kwargs):
    """At most once (no ackers): every emitted msg id is acked at once, one ack_batch a wave."""
    spout = BatchAckSpout(["num"])
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("mid", FailOdd(), parallelism=2).shuffle_grouping("src")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", {Config.TOPOLOGY_ACKER_EXECUTORS: 0, Config.SQUALL_WAVE_MAX_TUPLES: 10},
                                b.create_topology())
        for i in range(40):
            spout.feed([i], i)
        cluster.wait_idle()
    rec = spout.record
    assert sorted(m for batch in rec["batches"] for m in batch) == list(range(40))  # odd ones too: not tracked
    assert len(rec["batches"]) == 4 and all(len(batch) == 10 for batch in rec["batches"])
    assert rec["single"] == [] and rec["failed"] == []
