"""Bolts and spouts of Storm's own integration tests, ported."""

from __future__ import annotations

from squall import BasicBolt, Bolt, Spout


class WordSpout(Spout):
    """Declares ["word"]; always replaced by mocked sources in tests."""

    def declare_output_fields(self, d):
        d.declare(["word"])


class WordCounter(BasicBolt):
    def prepare(self, conf, context):
        self.counts = {}

    def declare_output_fields(self, d):
        d.declare(["word", "count"])

    def execute(self, t, collector):
        w = t[0]
        self.counts[w] = self.counts.get(w, 0) + 1
        collector.emit([w, self.counts[w]])


class GlobalCount(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector
        self.count = 0

    def declare_output_fields(self, d):
        d.declare(["global-count"])

    def execute(self, t):
        self.count += 1
        self.collector.emit([self.count], anchors=[t])
        self.collector.ack(t)


class AggregatesCounter(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector
        self.counts = {}

    def declare_output_fields(self, d):
        d.declare(["agg-global"])

    def execute(self, t):
        self.counts[t[0]] = t[1]
        self.collector.emit([sum(self.counts.values())])
        self.collector.ack(t)


class IdentityBolt(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, d):
        d.declare(["num"])

    def execute(self, t):
        self.collector.emit(t.values, anchors=[t])
        self.collector.ack(t)


class AckEveryOtherBolt(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector
        self.state = True

    def declare_output_fields(self, d):
        pass

    def execute(self, t):
        if self.state:
            self.collector.ack(t)
        self.state = not self.state


class AggBolt(Bolt):
    """Holds inputs until it has `branches`, then emits one tuple anchored to all and acks them."""

    def __init__(self, branches):
        self.branches = branches

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.seen = []

    def declare_output_fields(self, d):
        d.declare(["num"])

    def execute(self, t):
        self.seen.append(t)
        if len(self.seen) == self.branches:
            self.collector.emit([1], anchors=list(self.seen))
            for s in self.seen:
                self.collector.ack(s)
            self.seen = []


class BranchingBolt(Bolt):
    def __init__(self, branches):
        self.branches = branches

    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, d):
        d.declare(["num"])

    def execute(self, t):
        for i in range(self.branches):
            self.collector.emit([i], anchors=[t])
        self.collector.ack(t)


class AckBolt(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, d):
        pass

    def execute(self, t):
        self.collector.ack(t)


class FailBolt(Bolt):
    """Fails every input."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, d):
        pass

    def execute(self, t):
        self.collector.fail(t)


class DupAnchorBolt(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, d):
        d.declare(["num"])

    def execute(self, t):
        self.collector.emit([1], anchors=[t, t])
        self.collector.ack(t)


class EmitTaskIdBolt(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector
        self.index = context.this_task_index

    def declare_output_fields(self, d):
        d.declare(["tid"])

    def execute(self, t):
        self.collector.emit([self.index], anchors=[t])
        self.collector.ack(t)


class ResetTimeoutBolt(Bolt):
    """Holds the first tuple and keeps resetting its timeout; never acks the second."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.n = 1
        self.first = None

    def declare_output_fields(self, d):
        pass

    def execute(self, t):
        if self.n == 1:
            self.first = t
        elif self.n == 2:
            self.collector.reset_timeout(self.first)
        elif self.n == 5:
            self.collector.ack(self.first)
            self.collector.ack(t)
        else:
            self.collector.reset_timeout(self.first)
            self.collector.ack(t)
        self.n += 1
