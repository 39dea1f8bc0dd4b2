"""Columnar bolts on both engines: mixed with ordinary bolts both ways, per-row tracking (a
failed row replays exactly its spout tuple), errors, and spout column emits."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from squall import Bolt, Config, LocalCluster, Spout, TopologyBuilder
from squall.columnar import ColumnarBolt
from squall.testing import complete_topology


class Src(Spout):
    def declare_output_fields(self, d):
        d.declare(["sentence"])


class Split(ColumnarBolt):
    """Sentences -> words (anchored to their sentence); fails sentences equal to "fail me"."""

    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute_batch(self, batch, c):
        words = pc.split_pattern(batch.column(0), " ")
        anchors = np.repeat(np.arange(batch.num_rows), pc.list_value_length(words).to_numpy())
        c.emit_batch({"word": pc.list_flatten(words)}, anchors)
        c.fail_rows(pc.equal(batch.column(0), "fail me").to_numpy(zero_copy_only=False))


class Count(Bolt):
    def prepare(self, conf, ctx, c):
        self.c, self.n = c, {}

    def declare_output_fields(self, d):
        d.declare(["word", "n"])

    def execute(self, t):
        w = t["word"]
        self.n[w] = self.n.get(w, 0) + 1
        self.c.emit([w, self.n[w]], anchors=t)
        self.c.ack(t)


class Relay(ColumnarBolt):
    """Passes every row on, anchored to itself; fails rows whose word is "drop"."""

    def declare_output_fields(self, d):
        d.declare(["word", "n"])

    def execute_batch(self, batch, c):
        c.emit_batch(batch, np.arange(batch.num_rows))
        c.fail_rows(pc.equal(batch.column("word"), "drop").to_numpy(zero_copy_only=False))


def test_tuple_and_columnar_bolts_mixed_both_ways(engine, cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("s", Src(), 2)
    b.set_bolt("split", Split(), 2).shuffle_grouping("s")
    b.set_bolt("count", Count(), 2).fields_grouping("split", ["word"])
    b.set_bolt("relay", Relay(), 3).fields_grouping("count", ["word"])
    sentences = [["a b c"], ["b c"], ["fail me"], ["c"], ["x drop y"], ["a a"]]
    r = complete_topology(b.create_topology(), {"s": sentences}, engine=engine, spark=cluster_kwargs.get("spark"))
    words = sorted(w for s in sentences for w in s[0].split())
    assert sorted(v[0] for v in r.emitted("split")) == words
    counted = sorted(map(tuple, r.emitted("count")))
    assert counted == sorted(map(tuple, r.emitted("relay")))
    final = {}
    for w, n in counted:
        final[w] = max(final.get(w, 0), n)
    assert final == {w: words.count(w) for w in set(words)}
    assert sorted(r.failed("s")) == [2, 4]  # "fail me" (split) and the sentence with "drop" (relay)
    assert sorted(r.acked("s")) == [0, 1, 3, 5]


class ColumnSpout(Spout):
    """Emits `n` rows in ONE emit_batch of columns (msg id = row number); replays failed ids in
    one batch; records acks and fails."""

    def __init__(self, n, replay=True):
        self.n, self.replays = n, replay

    def declare_output_fields(self, d):
        d.declare(["k", "v"])

    def open(self, conf, context, collector):
        self.c, self.sent, self.replay = collector, False, []
        self.acked, self.failed = [], []

    def next_tuple(self):
        if not self.sent:
            self.sent = True
            k = np.arange(self.n)
            self.c.emit_batch({"k": k, "v": pa.array([f"v{i}" for i in range(self.n)])}, msg_ids=k)
        elif self.replay:
            ids, self.replay = np.array(self.replay), []
            self.c.emit_batch({"k": ids, "v": pa.array([f"v{i}" for i in ids])}, ids)

    def ack(self, msg_id):
        self.acked.append(msg_id)

    def fail(self, msg_id):
        self.failed.append(msg_id)
        if self.replays:
            self.replay.append(msg_id)


class FailOnce(ColumnarBolt):
    """Fails the row whose k is `bad` the first time it sees it; emits the rest on, anchored."""

    def __init__(self, bad):
        self.bad, self.done = bad, False

    def declare_output_fields(self, d):
        d.declare(["k"])

    def execute_batch(self, batch, c):
        k = batch.column("k").to_numpy()
        c.emit_batch({"k": k}, np.arange(len(k)))
        hit = k == self.bad
        if hit.any() and not self.done:
            self.done = True
            c.fail_rows(np.flatnonzero(hit))


class Sink(Bolt):
    def prepare(self, conf, ctx, c):
        self.c = c

    def execute(self, t):
        self.c.ack(t)


def run_cluster(cluster_kwargs, builder, conf=None):
    cluster = LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs)
    cluster.submit_topology("t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30, Config.TOPOLOGY_MAX_SPOUT_PENDING: 20000,
                                  **(conf or {})}, builder.create_topology())
    return cluster


def test_failing_one_row_of_10000_replays_exactly_that_tuple(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("s", ColumnSpout(10_000))
    b.set_bolt("work", FailOnce(4321), 2).fields_grouping("s", ["k"])
    b.set_bolt("sink", Sink(), 2).shuffle_grouping("work")
    with run_cluster(cluster_kwargs, b) as cluster:
        cluster.wait_idle()
        spout = cluster.spout_instances("t", "s")[0]
        assert spout.failed == [4321]
        assert sorted(spout.acked) == list(range(10_000))  # 9,999 at once, 4321 after its one replay
        stats = cluster.get_topology_stats("t")
        assert stats["work"]["executed"] == 10_001  # the replay sent that one row again, nothing more
        assert stats["sink"]["executed"] == 10_001


class Raises(ColumnarBolt):
    def declare_output_fields(self, d):
        d.declare(["k"])

    def execute_batch(self, batch, c):
        c.emit_batch({"k": batch.column("k")}, np.arange(batch.num_rows))
        raise RuntimeError("boom")


class BadAnchors(ColumnarBolt):
    def __init__(self, how):
        self.how = how

    def declare_output_fields(self, d):
        d.declare(["k"])

    def execute_batch(self, batch, c):
        n = batch.num_rows
        if self.how == "length":
            c.emit_batch({"k": batch.column("k")}, np.arange(n - 1))
        elif self.how == "range":
            c.emit_batch({"k": batch.column("k")}, np.arange(n) + 1)
        else:
            c.fail_rows([n])


@pytest.mark.parametrize("bolt,text", [
    (Raises(), "RuntimeError: boom"),
    (BadAnchors("length"), "'work': emit_batch got 49 anchor(s) for 50 output row(s)"),
    (BadAnchors("range"), "'work': emit_batch anchors an output row to input row 50, but the input batch has 50"),
    (BadAnchors("fail"), "'work': fail_rows got row 50, but the input batch has 50 row(s)"),
])
def test_execute_batch_errors_fail_the_batch_and_report_once(cluster_kwargs, bolt, text):
    b = TopologyBuilder()
    b.set_spout("s", ColumnSpout(50, replay=False))
    b.set_bolt("work", bolt).shuffle_grouping("s")
    b.set_bolt("sink", Sink()).shuffle_grouping("work")
    with run_cluster(cluster_kwargs, b) as cluster:
        cluster.wait_idle()
        spout = cluster.spout_instances("t", "s")[0]
        assert sorted(spout.failed) == list(range(50)) and not spout.acked
        errors = cluster.get_errors("t")
        assert len(errors) == 1, errors  # once for the batch, saying its size
        assert "execute_batch on 50 row(s) from s:default" in errors[0].values
        assert text in errors[0].error and errors[0].component == "work"
        assert cluster.get_topology_stats("t")["sink"]["executed"] == 0


def test_spout_emit_batch_forms(engine, cluster_kwargs):
    """Rows in one tree (msg_id), columns one tree per row (msg_ids), and both given: an error."""

    class Forms(Spout):
        def declare_output_fields(self, d):
            d.declare(["k"])

        def open(self, conf, context, collector):
            self.c, self.step, self.acked, self.errors = collector, 0, [], []

        def next_tuple(self):
            self.step += 1
            if self.step == 1:
                self.c.emit_batch([[1], [2]], "tree")
                self.c.emit_batch(pa.record_batch({"k": [3, 4]}), ["r3", "r4"])
                self.c.emit_batch({"k": [5, 6]}, msg_id="both")
                try:
                    self.c.emit_batch({"k": [7]}, ["x"], msg_id="y")
                except ValueError as e:
                    self.errors.append(str(e))

        def ack(self, m):
            self.acked.append(m)

    b = TopologyBuilder()
    b.set_spout("s", Forms())
    b.set_bolt("work", Relay2(), 2).shuffle_grouping("s")
    with run_cluster(cluster_kwargs, b) as cluster:
        cluster.wait_idle()
        spout = cluster.spout_instances("t", "s")[0]
        assert sorted(spout.acked) == ["both", "r3", "r4", "tree"]
        assert spout.errors and "both msg_id" in spout.errors[0]
        assert cluster.get_topology_stats("t")["work"]["executed"] == 6


class Relay2(ColumnarBolt):
    def declare_output_fields(self, d):
        d.declare(["k"])

    def execute_batch(self, batch, c):
        c.emit_batch(batch, np.arange(batch.num_rows))


class Mixed(Spout):
    """Row 0..3 as ints, then one str in the same field: a batch that cannot be a column."""

    def declare_output_fields(self, d):
        d.declare(["k"])

    def open(self, conf, context, collector):
        self.c, self.acked, self.failed, self.step = collector, [], [], 0

    def next_tuple(self):
        self.step += 1
        if self.step == 1:
            for i, v in enumerate([1, 2, 3, "x"]):
                self.c.emit([v], msg_id=i)

    def ack(self, m):
        self.acked.append(m)

    def fail(self, m):
        self.failed.append(m)


class ToTasks(ColumnarBolt):
    """Sends the row with key k to task k % n of the direct stream's subscriber (emit_direct_batch)."""

    def prepare(self, conf, context):
        self.tasks = context.component_tasks("sink")

    def declare_output_fields(self, d):
        d.declare(["k"], direct=True)

    def execute_batch(self, batch, c):
        k = batch.column("k").to_numpy()
        c.emit_direct_batch(np.array(self.tasks)[k % len(self.tasks)], {"k": k}, np.arange(len(k)))


class OnlyMine(Bolt):
    """Acks the keys k with k % n == its task index, fails any other (a row sent to the wrong task)."""

    def prepare(self, conf, ctx, c):
        self.c, self.i, self.n = c, ctx.this_task_index, len(ctx.component_tasks(ctx.this_component_id))

    def execute(self, t):
        (self.c.ack if t["k"] % self.n == self.i else self.c.fail)(t)


def test_rows_that_cannot_be_columns_fail_with_the_field_named(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("s", Mixed())
    b.set_bolt("work", Relay2()).global_grouping("s")
    with run_cluster(cluster_kwargs, b) as cluster:
        cluster.wait_idle()
        spout = cluster.spout_instances("t", "s")[0]
        assert sorted(spout.failed) == [0, 1, 2, 3] and not spout.acked
        (err,) = cluster.get_errors("t")
        assert "field 'k' cannot be an Arrow column" in err.error and err.component == "work"


def test_emit_direct_batch_reaches_the_named_tasks(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("s", ColumnSpout(10, replay=False))
    b.set_bolt("direct", ToTasks()).shuffle_grouping("s")
    b.set_bolt("sink", OnlyMine(), 2).direct_grouping("direct")
    with run_cluster(cluster_kwargs, b) as cluster:
        cluster.wait_idle()
        spout = cluster.spout_instances("t", "s")[0]
        assert sorted(spout.acked) == list(range(10)) and not spout.failed
        assert cluster.get_topology_stats("t")["sink"]["executed"] == 10
