"""Stateful word count: counts that survive restarts (squall.state, Storm's stateful bolts).

    sentences (SentenceSpout) --shuffle--> split (SplitSentence) --fields(word)--> count (StatefulWordCount)

`StatefulWordCount` keeps its counts in a KeyValueState, saved every
`topology.state.checkpoint.interval.ms` (1 s here) in SQLite (the default provider; the file is
`~/.local/share/squall/state.sqlite` unless `topology.state.provider.config` = {"path": ...}).
Its acks are held until the checkpoint commits the counts they changed, so a sentence is acked
only once its words are counted durably. Stop it and run it again: the counts go on from the
last commit (same topology name, same provider config).

Run it:

    python examples/stateful_wordcount.py --engine local --seconds 10
    squall run examples/stateful_wordcount.py --engine spark --name wordcount-state
"""

from __future__ import annotations

import random
import sys
from typing import Any

from squall import BasicBolt, Config, Spout, StormTopology, TopologyBuilder
from squall.state import BaseStatefulBolt

WORDS = "the cow jumped over the moon an apple a day keeps the doctor away four score and seven years ago".split()


class SentenceSpout(Spout):
    """Random sentences with msg ids; a failed one is emitted again. `limit`: at most this many."""

    def __init__(self, limit: int | None = None, seed: int = 7):
        self.limit, self.seed = limit, seed

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.rng = random.Random(self.seed + context.this_task_index)
        self.pending: dict[int, str] = {}
        self.replay: list[int] = []
        self.emitted = 0

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.pop()
        elif self.limit is None or self.emitted < self.limit:
            msg_id, self.emitted = self.emitted, self.emitted + 1
            self.pending[msg_id] = " ".join(self.rng.choices(WORDS, k=self.rng.randint(3, 9)))
        else:
            return
        self.collector.emit([self.pending[msg_id]], msg_id=msg_id)

    def ack(self, msg_id: Any) -> None:
        self.pending.pop(msg_id, None)

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        if msg_id in self.pending:
            self.replay.append(msg_id)


class SplitSentence(BasicBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])

    def execute(self, tuple: Any, collector: Any) -> None:  # noqa: A002 - Storm's parameter name
        for word in tuple[0].split():
            collector.emit([word])


class StatefulWordCount(BaseStatefulBolt):
    """Count per word in the state; emits [word, count] anchored to its input, then acks it
    (the ack reaches the spout after the next checkpoint's commit)."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector

    def init_state(self, state: Any) -> None:
        self.state = state  # the last committed counts of this task

    def execute(self, tuple: Any) -> None:  # noqa: A002
        word = tuple[0]
        count = self.state.get(word, 0) + 1
        self.state.put(word, count)
        self.collector.emit([word, count], anchors=tuple)
        self.collector.ack(tuple)


def build_topology(parallelism: int = 2, limit: int | None = None) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(limit=limit), parallelism=1)
    builder.set_bolt("split", SplitSentence(), parallelism=parallelism).shuffle_grouping("sentences")
    builder.set_bolt("count", StatefulWordCount(), parallelism=parallelism).fields_grouping("split", ["word"])
    return builder.create_topology()


CONF = Config()
CONF.set_max_spout_pending(5000)
CONF.set_message_timeout_secs(30)
CONF[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 1000


if __name__ == "__main__":
    from squall.cli import main

    sys.exit(main(["run", __file__] + sys.argv[1:]))
