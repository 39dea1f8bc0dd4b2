"""Tick tuples on both engines: `topology.tick.tuple.freq.secs` per bolt or topology-wide,
delivered under simulated time by `advance_time`, untracked, and measured in waves."""

from __future__ import annotations

import pytest

from squall import Bolt, Config, InvalidTopologyException, LocalCluster, TopologyBuilder, is_tick
from squall.engine.driver.coordinator import Coordinator
from squall.engine.driver.ticks import tick_batch
from squall.engine.local import LocalExecutor
from squall.reliability.tuple import tuples_of
from squall.testing import AckFailMapTracker, FeederSpout


class FlushOnTick(Bolt):
    """Holds words and, on each tick, emits how many it holds, then acks them (Storm's pattern)."""

    def prepare(self, conf, context, collector):
        self.collector, self.held, self.ticks = collector, [], 0

    def declare_output_fields(self, d):
        d.declare(["tick", "words", "source"])

    def execute(self, t):
        if not is_tick(t):
            self.held.append(t)
            return
        self.ticks += 1
        self.collector.ack(t)  # allowed, a no-op (CountAll fails its ticks)
        words = sorted(h["word"] for h in self.held)
        self.collector.emit([self.ticks, words, [t.source_component, t.source_task, t.source_stream, t.values]],
                            anchors=self.held or None)
        for h in self.held:
            self.collector.ack(h)
        self.held = []


class CountAll(Bolt):
    """Counts ticks and other inputs; emits the totals on every input."""

    def prepare(self, conf, context, collector):
        self.collector, self.ticks, self.other = collector, 0, 0

    def declare_output_fields(self, d):
        d.declare(["ticks", "other"])

    def execute(self, t):
        if is_tick(t):
            self.ticks += 1
        else:
            self.other += 1
        self.collector.emit([self.ticks, self.other])
        (self.collector.fail if is_tick(t) else self.collector.ack)(t)  # failing a tick: allowed, no tree


def _per_task(cluster, name, component):
    return cluster.coordinator(name).captured.get(component, {}).get("default", {})


def test_flush_on_tick_acks_held_tuples_at_each_due_time(cluster_kwargs):
    spout, tracker = FeederSpout(["word"]), AckFailMapTracker()
    spout.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("words", spout)
    (b.set_bolt("flush", FlushOnTick(), parallelism=2).shuffle_grouping("words")
     .add_configuration(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 10))
    b.set_bolt("plain", CountAll()).shuffle_grouping("words")  # no ticks: not configured
    with LocalCluster(simulated_time=True, stepped=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", Config({Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 100}), b.create_topology())
        for i, w in enumerate(["a", "b", "c", "d"]):
            spout.feed([w], msg_id=i)
        cluster.advance_time(9.5)
        assert not any(tracker.is_acked(i) for i in range(4))  # held: no tick yet
        assert _per_task(cluster, "t", "flush") == {}
        cluster.advance_time(0.5)  # t = 10: the first tick, to every task
        assert all(tracker.is_acked(i) for i in range(4))
        cluster.advance_time(25)  # t = 20 and 30: two more ticks, nothing held
        emitted = _per_task(cluster, "t", "flush")
        plain = _per_task(cluster, "t", "plain")
        errors = cluster.get_errors("t")
    assert errors == []  # acking and failing a tick is allowed
    assert len(emitted) == 2
    words = sorted(w for rows in emitted.values() for r in rows for w in r[1])
    assert words == ["a", "b", "c", "d"]
    for rows in emitted.values():
        assert [r[0] for r in rows] == [1, 2, 3]
        assert [r[1] for r in rows][1:] == [[], []]
        assert all(r[2] == ["__system", -1, "__tick", [10]] for r in rows)
    assert [r[0] for rows in plain.values() for r in rows] == [0, 0, 0, 0]


def test_topology_wide_ticks_reach_every_bolt_task_and_no_spout(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("words", FeederSpout(["word"]))
    b.set_bolt("count", CountAll(), parallelism=3).shuffle_grouping("words")
    b.set_bolt("after", CountAll(), parallelism=2).shuffle_grouping("count")
    conf = Config({Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 2})
    with LocalCluster(simulated_time=True, stepped=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", conf, b.create_topology())
        cluster.advance_time(7)  # ticks at 2, 4, 6
        count = _per_task(cluster, "t", "count")
        after = _per_task(cluster, "t", "after")
        stats = cluster.get_topology_stats("t")
        errors = cluster.get_errors("t")
    assert errors == []
    assert len(count) == 3
    assert all([r[0] for r in rows] == [1, 2, 3] for rows in count.values())
    # "after" gets its own three ticks and the 9 untracked emits of "count", in the same waves
    assert len(after) == 2
    assert sum(rows[-1][0] for rows in after.values()) == 2 * 3
    assert sum(rows[-1][1] for rows in after.values()) == 9
    assert stats["count"]["executed"] == 9


def test_per_bolt_setting_overrides_topology_wide(cluster_kwargs):
    class Fast(CountAll):
        def get_component_configuration(self):
            return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 1}

    b = TopologyBuilder()
    b.set_spout("words", FeederSpout(["word"]))
    b.set_bolt("fast", Fast()).shuffle_grouping("words")
    b.set_bolt("slow", CountAll()).shuffle_grouping("words")
    b.set_bolt("off", CountAll()).shuffle_grouping("words").add_configuration(
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, None)
    with LocalCluster(simulated_time=True, stepped=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", Config({Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 4}), b.create_topology())
        cluster.advance_time(8)
        ticks = {c: sum(len(rows) for rows in _per_task(cluster, "t", c).values()) for c in ("fast", "slow", "off")}
    assert ticks == {"fast": 8, "slow": 2, "off": 0}


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("nan")])
def test_a_bad_frequency_is_refused_at_submit_naming_the_bolt(bad):
    b = TopologyBuilder()
    b.set_spout("words", FeederSpout(["word"]))
    b.set_bolt("count", CountAll()).shuffle_grouping("words").add_configuration(
        Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS, bad)
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        with pytest.raises(InvalidTopologyException, match=r"bolt 'count'.*tick.tuple.freq.secs"):
            cluster.submit_topology("t", Config(), b.create_topology())


class ManualClock:
    """A clock the test sets by hand: to see which wave carries each tick."""

    simulated = False

    def __init__(self):
        self.t = 0.0

    def now(self):
        return self.t


def test_a_tick_is_delivered_in_the_first_wave_at_or_after_its_due_time():
    b = TopologyBuilder()
    b.set_spout("words", FeederSpout(["word"]))
    b.set_bolt("count", CountAll(), parallelism=2).shuffle_grouping("words")
    topology = b.create_topology()
    conf = Config({Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 1})
    clock = ManualClock()
    coord = Coordinator("t", topology, conf, LocalExecutor(topology, conf, capture=True), clock, capture=True)
    coord.start()
    executed = []
    for now in [0.3, 0.99, 1.0, 1.2, 1.7, 2.05, 5.5, 5.9, 6.0]:  # the start time of each wave
        clock.t = now
        executed.append(coord.run_wave().executed)
    coord.close()
    # ticks due at 1, 2, 3..5 (one wave starts after all three: delivered once), 6
    assert executed == [0, 0, 2, 0, 0, 2, 2, 0, 2]
    lag = [(d.due, d.wave, d.at) for d in coord.ticks.delivered]
    assert lag == [(1.0, 3, 1.0), (2.0, 6, 2.05), (3.0, 7, 5.5), (6.0, 9, 6.0)]


def test_is_tick_tells_ticks_from_other_tuples():
    tick = tuples_of(tick_batch(5))[0]
    assert is_tick(tick) and tick.values == [5] and tick.fields == ["rate_secs"]
    assert tick.message_id == {}
    from squall.reliability.batch import TupleBatch

    other = tuples_of(TupleBatch("__system", "default", ("x",), -1, [[1]]))[0]
    assert not is_tick(other)
