"""Word count: Storm's classic first topology, with replay of failed sentences.

    sentences (RandomSentenceSpout) --shuffle--> split (AnchoringSplitSentence) --fields["word"]--> count (WordCount)

The split is written as Storm's documentation writes it (a Bolt that anchors each word to its
sentence, then acks the sentence); `SplitSentence` is the same as a BasicBolt.

Run it:

    python examples/wordcount.py --engine local --seconds 10
    squall run examples/wordcount.py --engine spark
"""

from __future__ import annotations

import random
import sys
from collections import deque
from typing import Any

from squall import BasicBolt, Bolt, Config, Spout, StormTopology, TopologyBuilder

WORDS = (
    "the quick brown fox jumps over lazy dog storm spark stream tuple bolt spout acker tree "
    "anchor replay wave batch cluster driver worker task field shuffle group count split word "
    "sentence river cloud rain thunder lightning apple orange banana cherry mango lemon grape "
    "north south east west red green blue"
).split()
assert len(WORDS) == 50, len(WORDS)

MIN_WORDS, MAX_WORDS = 5, 12
MAX_RETRIES = 3


class RandomSentenceSpout(Spout):
    """Random sentences from a fixed vocabulary, each emitted with a msg id.

    Pending sentences are kept by msg id; a failed one goes to a replay queue and is emitted
    again (same msg id, same sentence) before any new sentence, at most `max_retries` times;
    after that it is dropped and counted in `given_up`.

    `limit`: at most this many new sentences per spout task (None: no end). Replays do not count.
    """

    def __init__(self, limit: int | None = None, seed: int = 42, max_retries: int = MAX_RETRIES):
        self.limit = limit
        self.seed = seed
        self.max_retries = max_retries

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.task_index = context.this_task_index
        self.ntasks = len(context.component_tasks(context.this_component_id))
        self.rng = random.Random(self.seed * 1_000_003 + self.task_index)
        self.pending: dict[int, str] = {}  # msg id -> sentence, until acked or given up
        self.retries: dict[int, int] = {}  # msg id -> replays so far
        self.replay: deque[int] = deque()
        self.emitted = 0  # new sentences
        self.replayed = 0
        self.acked = 0
        self.failed = 0
        self.given_up = 0

    def _sentence(self) -> str:
        n = self.rng.randint(MIN_WORDS, MAX_WORDS)
        return " ".join(self.rng.choices(WORDS, k=n))

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.popleft()
            sentence = self.pending.get(msg_id)
            if sentence is not None:
                self.replayed += 1
                self.collector.emit([sentence], msg_id=msg_id)
                return
        if self.limit is not None and self.emitted >= self.limit:
            return
        # Unique across the spout's tasks: task i uses ids i, i + n, i + 2n, ...
        msg_id = self.emitted * self.ntasks + self.task_index
        self.emitted += 1
        sentence = self._sentence()
        self.pending[msg_id] = sentence
        self.collector.emit([sentence], msg_id=msg_id)

    def ack(self, msg_id: Any) -> None:
        self.acked += 1
        self.pending.pop(msg_id, None)
        self.retries.pop(msg_id, None)

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        self.failed += 1
        if msg_id not in self.pending:
            return
        tries = self.retries.get(msg_id, 0)
        if tries >= self.max_retries:
            self.given_up += 1
            del self.pending[msg_id]
            self.retries.pop(msg_id, None)
            return
        self.retries[msg_id] = tries + 1
        self.replay.append(msg_id)


class AnchoringSplitSentence(Bolt):
    """One tuple per word, as Storm's documentation writes the split: each word anchored to the
    sentence, then the sentence acked."""

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])

    def execute(self, tuple: Any) -> None:  # noqa: A002 - Storm's parameter name
        for word in tuple[0].split():
            self.collector.emit([word], anchors=[tuple])
        self.collector.ack(tuple)


class SplitSentence(BasicBolt):
    """The same split as a BasicBolt: every emit anchored to the input, the input acked when
    `execute` returns."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])

    def execute(self, tuple: Any, collector: Any) -> None:  # noqa: A002 - Storm's parameter name
        for word in tuple[0].split():
            collector.emit([word])


class WordCount(BasicBolt):
    """Running count per word; emits [word, count] (anchored to its input and acked by
    BasicBolt, as Storm's storm-starter WordCount, a BaseBasicBolt)."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])

    def prepare(self, conf: dict, context: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tuple: Any, collector: Any) -> None:  # noqa: A002
        word = tuple[0]
        count = self.counts.get(word, 0) + 1
        self.counts[word] = count
        collector.emit([word, count])


SPLITS = {"anchoring": AnchoringSplitSentence, "basic": SplitSentence}


def build_topology(parallelism: int = 2, limit: int | None = None, split: str = "anchoring") -> StormTopology:
    """`split`: "anchoring" (Storm's documented form) or "basic" (a BasicBolt)."""
    builder = TopologyBuilder()
    builder.set_spout("sentences", RandomSentenceSpout(limit=limit), parallelism=1)
    builder.set_bolt("split", SPLITS[split](), parallelism=parallelism).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), parallelism=parallelism).fields_grouping("split", ["word"])
    return builder.create_topology()


CONF = Config()
CONF.set_max_spout_pending(5000)
CONF.set_message_timeout_secs(30)


if __name__ == "__main__":
    from squall.cli import main

    sys.exit(main(["run", __file__] + sys.argv[1:]))
