"""Windowed bolts and topologies shared by the windowing tests (both engines)."""

from __future__ import annotations

from squall import Bolt, Config, LocalCluster, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout
from squall.windowing import BaseWindowedBolt


class Recorder(BaseWindowedBolt):
    """Emits one tuple per window: the ids of get(), get_new(), get_expired(), and its bounds."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, d):
        d.declare(["window", "new", "expired", "start", "end"])

    def execute(self, window):
        ids = [t["id"] for t in window.get()]
        self.collector.emit([ids, [t["id"] for t in window.get_new()], [t["id"] for t in window.get_expired()],
                             window.start_timestamp, window.end_timestamp])


class Sink(Bolt):
    """Acks everything; fails every tuple whose window holds an id in `fail_ids`."""

    def __init__(self, fail_ids=()):
        self.fail_ids = set(fail_ids)

    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, d):
        pass

    def execute(self, t):
        if self.fail_ids and self.fail_ids & set(t[0]):
            self.collector.fail(t)
        else:
            self.collector.ack(t)


def windowed_cluster(cluster_kwargs, bolt, fields=("id",), conf=None, sink=None, late_sink=False):
    """A feeder -> windowed bolt (-> sink) topology under simulated time, capturing emits."""
    spout = FeederSpout(list(fields))
    tracker = AckFailMapTracker()
    spout.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("win", bolt).global_grouping("src")
    if sink is not None:
        b.set_bolt("sink", sink).shuffle_grouping("win")
    if late_sink:
        b.set_bolt("late", Sink()).shuffle_grouping("win", "late")
    cluster = LocalCluster(simulated_time=True, capture=True, **cluster_kwargs)
    cluster.submit_topology("w", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30, **(conf or {})}, b.create_topology())
    return cluster, spout, tracker


def windows(cluster, stream="default"):
    """What the windowed bolt emitted on `stream`, in order."""
    per_task = cluster.coordinator("w").captured.get("win", {}).get(stream, {})
    return [v for task in sorted(per_task) for v in per_task[task]]


def feed(cluster, spout, ids, **extra):
    for i in ids:
        spout.feed([i, *extra.values()] if extra else [i], i)
    cluster.wait_idle()
