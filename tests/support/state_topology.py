"""A stateful word count for the state tests: numbered sentences from a durable spout (it
records acks in SQLite, committed in `ack`, and replays what is neither acked nor failed on
restart), split into (sid, pos, word), counted by a stateful bolt that also records, in the
same state, the (sid, pos) it counted: a replayed word already in the committed state is acked
without being counted again."""

from __future__ import annotations

import random
import sqlite3
import zlib
from collections import Counter

from squall import BasicBolt, Bolt, Spout, TopologyBuilder
from squall.state import BaseStatefulBolt

VOCAB = ["storm", "spark", "squall", "tuple", "bolt", "spout", "ack", "state", "wave", "commit", "kill"]


def sentences(n: int, seed: str = "state") -> list[str]:
    rng = random.Random(zlib.crc32(seed.encode()))
    return [" ".join(rng.choice(VOCAB) for _ in range(rng.randint(2, 6))) for _ in range(n)]


def true_counts(n: int, seed: str = "state") -> Counter:
    return Counter(w for s in sentences(n, seed) for w in s.split())


class DurableSentenceSpout(Spout):
    """Emits sentence i with msg id i; `ack` inserts i into `acks` of `ack_db` and commits."""

    def __init__(self, n: int, ack_db: str | None = None, seed: str = "state"):
        self.n, self.ack_db, self.seed = n, ack_db, seed

    def declare_output_fields(self, d):
        d.declare(["sid", "sentence"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.lines = sentences(self.n, self.seed)
        self.acked: set[int] = set()
        self.db = None
        if self.ack_db:
            self.db = sqlite3.connect(self.ack_db, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("CREATE TABLE IF NOT EXISTS acks (sid INTEGER PRIMARY KEY)")
            self.acked = {r[0] for r in self.db.execute("SELECT sid FROM acks")}
        self.todo = [i for i in range(self.n) if i not in self.acked]
        self.todo.reverse()  # pop() from the end: ascending order

    def next_tuple(self):
        if self.todo:
            i = self.todo.pop()
            self.collector.emit([i, self.lines[i]], msg_id=i)

    def ack(self, msg_id):
        if msg_id not in self.acked:
            self.acked.add(msg_id)
            if self.db is not None:
                self.db.execute("INSERT OR IGNORE INTO acks (sid) VALUES (?)", (msg_id,))

    def fail(self, msg_id):
        self.todo.append(msg_id)

    def close(self):
        if self.db is not None:
            self.db.close()


class SplitWords(BasicBolt):
    def declare_output_fields(self, d):
        d.declare(["sid", "pos", "word"])

    def execute(self, t, collector):
        for pos, w in enumerate(t["sentence"].split()):
            collector.emit([t["sid"], pos, w])


class CountWords(BaseStatefulBolt):
    """count:<word> -> count; ("seen", sid, pos) -> 1 for every word counted (in the same state,
    so committed together): a replay of a word already committed is acked, not counted again."""

    def declare_output_fields(self, d):
        d.declare(["word", "count"])

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.skipped = context.register_counter("skipped")

    def init_state(self, state):
        self.state = state

    def execute(self, t):
        key = ("seen", t["sid"], t["pos"])
        w = t["word"]
        self.last_skipped = self.state.get(key) is not None
        if not self.last_skipped:
            n = self.state.get(("count", w), 0) + 1
            self.state.put(("count", w), n)
            self.state.put(key, 1)
            self.collector.emit([w, n], anchors=t)
        else:
            self.skipped.inc()
        self.collector.ack(t)


class PlainCount(BaseStatefulBolt):
    """Counts words, no (sentence, position) keys: what a restart must continue from."""

    def declare_output_fields(self, d):
        d.declare(["word", "count"])

    def prepare(self, conf, context, collector):
        self.collector = collector

    def init_state(self, state):
        self.state = state
        self.initial = dict(state.items())

    def execute(self, t):
        w = t["word"]
        n = self.state.get(("count", w), 0) + 1
        self.state.put(("count", w), n)
        self.collector.emit([w, n], anchors=t)  # the input's tree waits for the sink too
        self.collector.ack(t)


class Sink(Bolt):
    """Downstream of the stateful bolt: acks its anchored emits, fails those of `fail_words`."""

    def __init__(self, fail_words: tuple[str, ...] = ()):
        self.fail_words = fail_words

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, t):
        (self.collector.fail if t["word"] in self.fail_words else self.collector.ack)(t)


def build(n: int, ack_db: str | None = None, counters: int = 2, seed: str = "state",
          spout: type = DurableSentenceSpout, counter: type = CountWords, sink: Sink | None = None) -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout("sentences", spout(n, ack_db, seed))
    b.set_bolt("split", SplitWords(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", counter(), counters).fields_grouping("split", ["word"])
    if sink is not None:
        b.set_bolt("sink", sink, 2).shuffle_grouping("count")
    return b


def committed(state_db: str, topology: str = "") -> tuple[Counter, set[tuple[int, int]]]:
    """The committed counts and (sid, pos) seen keys in a SQLite state file (all tasks)."""
    import pickle  # noqa: PLC0415

    c = sqlite3.connect(state_db)
    try:
        rows = c.execute("SELECT ns, k, v FROM squall_state").fetchall()
    except sqlite3.OperationalError:  # no commit yet
        rows = []
    finally:
        c.close()
    counts: Counter = Counter()
    seen: set[tuple[int, int]] = set()
    for ns, k, v in rows:
        if topology and not ns.startswith(topology + "/"):
            continue
        key = pickle.loads(k)
        if key[0] == "count":
            counts[key[1]] += pickle.loads(v)
        else:
            seen.add((key[1], key[2]))
    return counts, seen


def acked_ids(ack_db: str) -> set[int]:
    c = sqlite3.connect(ack_db)
    try:
        return {r[0] for r in c.execute("SELECT sid FROM acks")}
    except sqlite3.OperationalError:
        return set()
    finally:
        c.close()
