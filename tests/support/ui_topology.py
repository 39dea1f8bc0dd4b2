"""A small metered topology for the UI tests: a spout of numbered sentences, a bolt that
splits them (user counter, gauge and histogram; fails every 7th sentence, raises on one), and
a sink. Deterministic, so every figure the UI shows can be computed by the test."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from squall import BasicBolt, Bolt, Spout, TopologyBuilder

BAD = "boom"  # the sentence that makes the split bolt raise


def sentence(i: int) -> str:
    return BAD if i == 11 else " ".join(f"w{(i * 7 + k) % 13}" + "x" * (k % 3) for k in range(1 + i % 4))


class NumberedSpout(Spout):
    """Emits sentence(i) with msg id i for i < n (n=None: forever); counts its emits."""

    def __init__(self, n: int | None):
        self.n = n

    def declare_output_fields(self, d):
        d.declare(["sentence"])

    def open(self, conf, context, collector):
        self.collector, self.i = collector, 0
        self.emits = context.register_counter("spout_emits")
        self.acked = 0
        context.register_gauge("acked_so_far", lambda: self.acked)

    def next_tuple(self):
        if self.n is not None and self.i >= self.n:
            return
        self.collector.emit([sentence(self.i)], msg_id=self.i)
        self.emits.inc()
        self.i += 1

    def ack(self, msg_id):
        self.acked += 1

    def fail(self, msg_id):
        pass


class MeteredSplit(Bolt):
    def prepare(self, conf, context, collector):
        self.collector, self.seen = collector, 0
        self.words = context.register_counter("words")
        self.lengths = context.register_histogram("word_length", buckets=[1, 2, 3, 4])
        context.register_gauge("seen", lambda: self.seen)

    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute(self, t):
        self.seen += 1
        s = t["sentence"]
        if s == BAD:
            raise ValueError("cannot split " + s)
        if len(s) % 7 == 3:
            self.collector.fail(t)
            return
        for w in s.split():
            self.collector.emit([w], anchors=t)
            self.words.inc()
            self.lengths.observe(len(w))
        self.collector.ack(t)


class Sink(BasicBolt):
    def declare_output_fields(self, d):
        pass

    def execute(self, t, collector):
        pass


def build(n: int | None = 200, split_tasks: int = 2):
    b = TopologyBuilder()
    b.set_spout("sentences", NumberedSpout(n))
    b.set_bolt("split", MeteredSplit(), parallelism=split_tasks).shuffle_grouping("sentences")
    b.set_bolt("sink", Sink(), parallelism=2).fields_grouping("split", ["word"])
    return b.create_topology()


def expected(n: int) -> dict:
    """What the topology does with n sentences: acked/failed trees, words, word lengths."""
    acked = failed = words = length_sum = 0
    for i in range(n):
        s = sentence(i)
        if s == BAD or len(s) % 7 == 3:
            failed += 1
            continue
        acked += 1
        words += len(s.split())
        length_sum += sum(len(w) for w in s.split())
    return {"acked": acked, "failed": failed, "words": words, "length_sum": length_sum}


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def post(url: str) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_for(pred, what: str, tries: int = 600):
    """Poll `pred` until true, counting tries (a generous bound, not a timing assertion)."""
    for _ in range(tries):
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")
