"""Topologies and bolts the Spark engine's recovery tests share (tests/engines/test_spark_engine.py
for per-wave tasks, test_resident.py for resident ones): state carried from wave to wave, a
spout that replays what fails, bolts that pass values on, record every execution or split numbers
into digits."""

from __future__ import annotations

from pathlib import Path

from squall import BasicBolt, Bolt, Spout, TopologyBuilder
from squall.testing import AckFailMapTracker, FeederSpout


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


def marker_lines(marker: Path) -> list[list[int]]:
    return [[int(x) for x in line.split()] for line in marker.read_text().splitlines()] if marker.exists() else []


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


class PassOn(Bolt):
    """Passes each value on, anchored, and acks it; `observe` sees every value first."""

    def __init__(self, path):
        self.path = path

    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        d.declare(["v"])

    def observe(self, value):
        pass

    def execute(self, t):
        self.observe(t[0])
        self.c.emit([t[0]], anchors=t)
        self.c.ack(t)


class RecordExecutions(PassOn):
    """Appends every executed value to the file `path`: a stage computed twice shows as a value twice."""

    def observe(self, value):
        with open(self.path, "a") as f:
            f.write(f"{value}\n")


def feed_rounds_with_a_poison(cluster, spout: ReplayingFeeder, rounds: int, per_round: int, poison_round: int,
                              at_once: bool) -> list[str]:
    """Feed `rounds` rounds of `per_round` values ("round-i"), and "poison" in round `poison_round`;
    round by round (each waited for: the poison in the middle of its round), or, `at_once`, all
    before the first wave (the poison first in its round's wave: with waves of `per_round`, two
    waves go in flight at once). Returns the values fed, poison left out."""
    for rnd in range(rounds):
        for i in range(per_round):
            spout.feed([f"{rnd}-{i}"], f"{rnd}-{i}")
            if (rnd, i) == (poison_round, per_round // 2) and not at_once:
                spout.feed(["poison"], "poison")
        if not at_once:
            cluster.wait_idle()
    if at_once:
        spout._queue.insert(poison_round * per_round, (["poison"], "poison"))
    cluster.wait_idle()
    return [f"{r}-{i}" for r in range(rounds) for i in range(per_round)]


class Digits(BasicBolt):
    """Each digit of a number, as a tuple of its own."""

    def declare_output_fields(self, d):
        d.declare(["digit"])

    def execute(self, t, collector):
        for ch in str(t[0]):
            collector.emit([ch])


class Numbers(Spout):
    """0 .. limit-1, one a call, each with its msg id; counts its acks and fails."""

    def __init__(self, limit: int):
        self.limit = limit

    def declare_output_fields(self, d):
        d.declare(["n"])

    def open(self, conf, context, collector):
        self.c = collector
        self.i = 0
        self.acked: list[int] = []
        self.failed = 0

    def next_tuple(self):
        if self.i < self.limit:
            self.c.emit([self.i], msg_id=self.i)
            self.i += 1

    def ack(self, msg_id):
        self.acked.append(msg_id)

    def fail(self, msg_id):
        self.failed += 1
