"""A topology for `squall run` whose bolt kills its Spark Python worker on one tuple (os._exit),
so that wave's job dies in Spark with Java stack traces: tests/engines/test_bad_input.py checks
they go to Spark's log file, not to the console. Spark engine only: on the local engine the
bolt would end the test's own process.

Its spout emits "ok" tuples, then one "crash"; with squall.max.replays 1 the lost wave's roots
are dead-lettered at once, so exactly one wave is lost and the run ends (`done`)."""

from __future__ import annotations

import os
import tempfile

from squall import Bolt, Config, Spout, TopologyBuilder

VALUES = ["ok-1", "ok-2", "crash"]

CONF = {
    Config.SQUALL_MAX_REPLAYS: 1,
    Config.SQUALL_DEAD_LETTER_PATH: os.path.join(tempfile.mkdtemp(prefix="squall-crash-"), "dead.jsonl"),
}


class OneByOneSpout(Spout):
    """Emits VALUES one per wave (the "ok" ones complete before the crash), each tracked. It runs
    in the driver: on a single slot, a tuple that kills the slot holding its own spout task could
    not be isolated (the topology would stop saying so: squall.engine.resident.driver)."""

    DRIVER_BOUND = True

    def declare_output_fields(self, declarer):
        declarer.declare(["v"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.next = 0
        self.settled = set()

    def next_tuple(self):
        if self.next < len(VALUES) and len(self.settled) == self.next:
            self.collector.emit([VALUES[self.next]], msg_id=self.next)
            self.next += 1

    def ack(self, msg_id):
        self.settled.add(msg_id)

    def fail(self, msg_id):
        self.settled.add(msg_id)


class CrashBolt(Bolt):
    """Acks what it gets; on "crash" ends its Python worker without a word, as a segfault would."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, declarer):
        pass

    def execute(self, t):
        if t[0] == "crash":
            os._exit(1)
        self.collector.ack(t)


def build_topology():
    b = TopologyBuilder()
    b.set_spout("src", OneByOneSpout())
    b.set_bolt("crash", CrashBolt()).shuffle_grouping("src")
    return b.create_topology()


def done(cluster, name):
    spout = cluster.spout_instances(name)[0]
    return len(spout.settled) == len(VALUES)
