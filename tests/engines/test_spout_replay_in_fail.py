"""A spout may emit from `fail` (replay at once) or `ack`, as in Storm: those emits go out
in the next wave, none is dropped."""

from __future__ import annotations

from squall import Bolt, LocalCluster, Spout, TopologyBuilder


class ReplayInFail(Spout):
    def __init__(self, n):
        self.n = n

    def declare_output_fields(self, d):
        d.declare(["i"])

    def open(self, conf, context, collector):
        self.collector, self.next, self.acked, self.failed = collector, 0, [], []

    def next_tuple(self):
        if self.next < self.n:
            self.collector.emit([self.next], msg_id=self.next)
            self.next += 1

    def ack(self, msg_id):
        self.acked.append(msg_id)

    def fail(self, msg_id):
        self.failed.append(msg_id)
        self.collector.emit([msg_id], msg_id=msg_id)  # the replay, from fail itself


class FailOddOnce(Bolt):
    """Fails every odd value the first time this task sees it."""

    def declare_output_fields(self, d):
        pass

    def prepare(self, conf, context, collector):
        self.collector, self.seen = collector, set()

    def execute(self, t):
        i = t["i"]
        if i % 2 and i not in self.seen:
            self.seen.add(i)
            self.collector.fail(t)
        else:
            self.collector.ack(t)


def test_emits_made_in_fail_are_replayed(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("s", ReplayInFail(20))
    b.set_bolt("b", FailOddOnce()).global_grouping("s")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", {}, b.create_topology())
        cluster.advance_time(1)
        spout = cluster.spout_instances("t")[0]
        assert sorted(spout.failed) == list(range(1, 20, 2))
        assert sorted(spout.acked) == list(range(20))
