"""pystorm's component kinds on squall, on both engines: Spout and ReliableSpout, Bolt with
auto_ack/auto_anchor/auto_fail on and off, named and direct streams, need_task_ids, ticks,
BatchingBolt and TicklessBatchingBolt under simulated time, the Tuple namedtuple."""

from __future__ import annotations

from squall import LocalCluster
from squall.streamparse import (
    BatchingBolt,
    Bolt,
    Grouping,
    ReliableSpout,
    Spout,
    Stream,
    TicklessBatchingBolt,
    Topology,
)

WORDS = ["apple", "avocado", "banana", "bad", "xray", "drop"]
TICK = "topology.tick.tuple.freq.secs"


class Feed(Spout):
    """Emits WORDS once each, with the word as tup_id; remembers every ack and fail. The tests read
    the running instance as time advances, so it runs in the driver."""

    outputs = ["word"]
    DRIVER_BOUND = True

    def initialize(self, stormconf, context):
        self.todo, self.acked, self.failed = list(WORDS), [], []
        self.conf_seen = stormconf

    def next_tuple(self):
        if self.todo:
            w = self.todo.pop(0)
            self.emit([w], tup_id=w)

    def ack(self, tup_id):
        self.acked.append(tup_id)

    def fail(self, tup_id):
        self.failed.append(tup_id)


class Replaying(ReliableSpout):
    outputs = ["word"]
    max_fails = 2
    DRIVER_BOUND = True  # read as it runs

    def initialize(self, stormconf, context):
        self.todo, self.acks = list(WORDS), []

    def next_tuple(self):
        if self.todo:
            w = self.todo.pop(0)
            self.emit([w], tup_id=w)

    def ack(self, tup_id):
        self.acks.append(tup_id)
        super().ack(tup_id)


class Upper(Bolt):
    """auto_ack, auto_anchor, auto_fail: raising fails the input, which the spout replays."""

    outputs = ["word"]

    def process(self, tup):
        if tup.values.word == "bad":
            raise ValueError("bad word")
        self.emit([tup.values.word.upper()])


class Router(Bolt):
    """Manual acking and anchoring; a named stream, need_task_ids, a direct stream."""

    outputs = [Stream(["word", "tasks"]), Stream(["word", "component", "stream", "task", "kind"], name="meta"),
               Stream(["word"], name="picked", direct=True)]
    auto_ack = False
    auto_anchor = False

    def initialize(self, conf, ctx):
        self.picker = max(int(t) for t, c in ctx["task->component"].items() if c == "picker")

    def process(self, tup):
        word = tup.values.word
        tasks = self.emit([word, ""], anchors=[tup], need_task_ids=True)
        self.emit([word, repr(tasks)], anchors=[tup.id])
        self.emit([word, tup.component, tup.stream, tup.task, type(tup.values).__name__], stream="meta")
        self.emit([word], stream="picked", direct_task=self.picker, anchors=[tup])
        if word == "drop":
            self.fail(tup.id)
        else:
            self.ack(tup)


class Picker(Bolt):
    outputs = ["word", "task"]

    def process(self, tup):
        self.emit([tup.values[0], self.task_id])


class Sink(Bolt):
    outputs = ["x"]

    def process(self, tup):
        pass


def _emitted(cluster, component, stream="default"):
    per_task = cluster.coordinator("t").captured.get(component, {}).get(stream, {})
    return sorted(tuple(v) for rows in per_task.values() for v in rows), per_task


def test_auto_fail_replays_with_reliable_spout_until_max_fails(cluster_kwargs):
    class T(Topology):
        feed = Replaying.spec()
        upper = Upper.spec(inputs=[feed], par=2)

    with LocalCluster(simulated_time=True, stepped=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", None, T)
        cluster.advance_time(1)
        spout = cluster.spout_instances("t", "feed")[0]
        acks, unacked, fails = list(spout.acks), dict(spout.unacked_tuples), dict(spout.failed_tuples)
        words, _ = _emitted(cluster, "upper")
        errors = cluster.get_errors("t")
    assert sorted(acks) == sorted(WORDS)  # "bad" acked (given up) after 1 + 2 tries
    assert unacked == {} and fails == {}
    assert words == sorted((w.upper(),) for w in WORDS if w != "bad")
    assert [(e.component, e.error) for e in errors] == [("upper", "ValueError: bad word")] * 3


def test_manual_acks_anchors_named_and_direct_streams(cluster_kwargs):
    class T(Topology):
        config = {"my.topology.key": 42}
        feed = Feed.spec()
        router = Router.spec(inputs=[feed])
        sink = Sink.spec(inputs=[router], par=2)
        picker = Picker.spec(inputs={router["picked"]: Grouping.DIRECT}, par=3)

    with LocalCluster(simulated_time=True, stepped=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", {"my.submit.key": 1}, T)
        cluster.advance_time(1)
        spout = cluster.spout_instances("t", "feed")[0]
        acked, failed, conf = sorted(spout.acked), spout.failed, spout.conf_seen
        routed, _ = _emitted(cluster, "router")
        meta, _ = _emitted(cluster, "router", "meta")
        picked, per_task = _emitted(cluster, "picker")
        errors = cluster.get_errors("t")
        picker_task = max(cluster.coordinator("t").topology.task_ids["picker"])
        sink_tasks = {repr([t]) for t in cluster.coordinator("t").topology.task_ids["sink"]}
    assert errors == []
    assert (conf["my.topology.key"], conf["my.submit.key"]) == (42, 1)  # class config under the submit conf
    assert failed == ["drop"] and acked == sorted(w for w in WORDS if w != "drop")
    for w in WORDS:  # need_task_ids gave the sink task the first emit went to
        tasks = [t for word, t in routed if word == w and t]
        assert len(tasks) == 1 and tasks[0] in sink_tasks
    assert meta == sorted((w, "feed", "default", 1, "FeedDefaultTuple") for w in WORDS)
    assert picked == sorted((w, picker_task) for w in WORDS)
    assert list(per_task) == [picker_task]


class TickCounter(Bolt):
    outputs = ["ticks", "rate"]

    def initialize(self, conf, ctx):
        self.ticks = 0

    def process(self, tup):
        pass

    def process_tick(self, tup):
        self.ticks += 1
        self.emit([self.ticks, tup.values[0]])


def test_process_tick_gets_ticks_from_the_spec_config(cluster_kwargs):
    class T(Topology):
        feed = Feed.spec()
        ticker = TickCounter.spec(inputs=[feed], par=2, config={TICK: 5})

    with LocalCluster(simulated_time=True, stepped=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", None, T)
        cluster.advance_time(12)
        _, per_task = _emitted(cluster, "ticker")
        acked = sorted(cluster.spout_instances("t", "feed")[0].acked)
    assert len(per_task) == 2 and all(rows == [[1, 5], [2, 5]] for rows in per_task.values())
    assert acked == sorted(WORDS)  # process() auto-acked


class ByLetter(BatchingBolt):
    outputs = ["letter", "words"]
    ticks_between_batches = 1  # pystorm: a batch after more than this many ticks, i.e. every 2nd

    def group_key(self, tup):
        return tup.values.word[0]

    def process_batch(self, key, tups):
        if key == "x":
            raise RuntimeError("no x please")
        self.emit([key, sorted(t.values.word for t in tups)])


def test_batching_bolt_acks_a_batch_after_processing_it_and_fails_a_failing_one(cluster_kwargs):
    class T(Topology):
        feed = Feed.spec()
        batches = ByLetter.spec(inputs={feed: Grouping.GLOBAL}, config={TICK: 1})

    with LocalCluster(simulated_time=True, stepped=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", None, T)
        spout = cluster.spout_instances("t", "feed")[0]
        cluster.advance_time(1.5)  # one tick: nothing processed yet
        before = (list(spout.acked), list(spout.failed), _emitted(cluster, "batches")[0])
        cluster.advance_time(1)  # the second tick: every batch processed
        acked, failed = sorted(spout.acked), spout.failed
        emitted, _ = _emitted(cluster, "batches")
        errors = cluster.get_errors("t")
    assert before == ([], [], [])
    assert failed == ["xray"] and acked == sorted(w for w in WORDS if w != "xray")
    assert emitted == [("a", ["apple", "avocado"]), ("b", ["bad", "banana"]), ("d", ["drop"])]
    assert [(e.component, e.error) for e in errors] == [("batches", "RuntimeError: no x please")]


class EveryThree(TicklessBatchingBolt):
    outputs = ["n"]
    secs_between_batches = 3

    def process_batch(self, key, tups):
        self.emit([len(tups)])


def test_tickless_batching_bolt_runs_on_topology_time(cluster_kwargs):
    class T(Topology):
        feed = Feed.spec()
        batches = EveryThree.spec(inputs=[feed])

    with LocalCluster(simulated_time=True, stepped=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", None, T)
        spout = cluster.spout_instances("t", "feed")[0]
        cluster.advance_time(2.9)
        before = list(spout.acked)
        cluster.advance_time(0.1)
        acked = sorted(spout.acked)
        emitted, _ = _emitted(cluster, "batches")
    assert before == []
    assert acked == sorted(WORDS) and emitted == [(len(WORDS),)]


def test_batching_bolt_without_ticks_says_what_to_set(cluster_kwargs):
    class Never(BatchingBolt):
        outputs = ["n"]

    class T(Topology):
        feed = Feed.spec()
        stuck = Never.spec(inputs=[feed])

    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", None, T)
        cluster.advance_time(1)
        failed = sorted(cluster.spout_instances("t", "feed")[0].failed)
        errors = cluster.get_errors("t")
    assert failed == sorted(WORDS)
    assert errors and all(e.component == "stuck" and "gets no tick tuples" in e.error
                          and "topology.tick.tuple.freq.secs" in e.error for e in errors)


class Quiet(Bolt):
    """auto_fail off: an error is reported, the input is left pending (it times out)."""

    outputs = ["x"]
    auto_fail = False

    def process(self, tup):
        self.log(f"got {tup.values.word}", level="debug")
        if tup.values.word == "bad":
            raise KeyError("missing")
        if tup.values.word == "drop":
            self.report_error("dropping one")


def test_without_auto_fail_an_error_is_reported_and_the_tuple_times_out(cluster_kwargs):
    class T(Topology):
        config = {"topology.message.timeout.secs": 10}
        feed = Feed.spec()
        quiet = Quiet.spec(inputs=[feed])

    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("t", None, T)
        cluster.advance_time(1)
        spout = cluster.spout_instances("t", "feed")[0]
        first = (sorted(spout.acked), list(spout.failed))
        cluster.advance_time(25)
        failed = list(spout.failed)
        errors = sorted((e.kind, e.error) for e in cluster.get_errors("t"))
    assert first == (sorted(w for w in WORDS if w != "bad"), [])
    assert failed == ["bad"]
    assert errors == [("reported", "KeyError: 'missing'"), ("reported", "dropping one")]
