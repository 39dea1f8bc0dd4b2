"""Windowed word count: the most frequent words of the last 10,000 words, every 1,000 words.

    sentences (SentenceSpout) --shuffle--> split (SplitSentence) --global--> top (TopWords) --> report

`TopWords` is a windowed bolt (squall.windowing): a sliding count window of 10,000 words that
fires every 1,000. Its emit is anchored to every word of the window, and each word is acked as
soon as no later window can hold it, so a sentence is acked once its words have left the windows.

Run it:

    python examples/windowed_wordcount.py --engine local --seconds 10
    squall run examples/windowed_wordcount.py --engine spark
"""

from __future__ import annotations

import random
import sys
from collections import Counter, deque
from operator import itemgetter
from typing import Any

from squall import BasicBolt, Bolt, Config, Spout, StormTopology, TopologyBuilder
from squall.windowing import BaseWindowedBolt, Count

WINDOW, INTERVAL = 10_000, 1_000
FIRST = itemgetter(0)  # a tuple's first value: mapped over a window's values in C
WORDS = ("the quick brown fox jumps over lazy dog storm spark stream tuple bolt spout acker tree anchor replay "
         "wave batch cluster driver worker task field shuffle group count split word").split()


class SentenceSpout(Spout):
    """Random sentences (5 to 12 words), each with a msg id; a failed one is emitted again.
    `limit`: at most this many new sentences (None: no end)."""

    def __init__(self, limit: int | None = None, seed: int = 42):
        self.limit = limit
        self.seed = seed

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.rng = random.Random(self.seed + context.this_task_index)
        self.pending: dict[int, str] = {}
        self.replay: deque[int] = deque()
        self.emitted = 0

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.popleft()
            self.collector.emit([self.pending[msg_id]], msg_id=msg_id)
        elif self.limit is None or self.emitted < self.limit:
            msg_id, self.emitted = self.emitted, self.emitted + 1
            self.pending[msg_id] = " ".join(self.rng.choices(WORDS, k=self.rng.randint(5, 12)))
            self.collector.emit([self.pending[msg_id]], msg_id=msg_id)

    def ack(self, msg_id: Any) -> None:
        self.pending.pop(msg_id, None)

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        if msg_id in self.pending:
            self.replay.append(msg_id)


class SplitSentence(BasicBolt):
    """One tuple per word (anchored to the sentence, acked by BasicBolt)."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])

    def execute(self, tuple: Any, collector: Any) -> None:  # noqa: A002
        for word in tuple[0].split():
            collector.emit([word])


class TopWords(BaseWindowedBolt):
    """Emits [top words, window size] for each window. Counts are kept up to date from each
    window's new and expired tuples (every word of this sliding window is in some window), and
    read as values only, so no Tuple objects are made."""

    def __init__(self, top: int = 3):
        self.top = top

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.counts: Counter = Counter()

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["top", "size"])

    def execute(self, window: Any) -> None:
        counts = self.counts
        counts.update(map(FIRST, window.new_values()))
        counts.subtract(Counter(map(FIRST, window.expired_values())))  # counted in C, then one step per word
        self.collector.emit([counts.most_common(self.top), len(window)])  # anchored to the whole window


class Report(Bolt):
    """Keeps the last window's top words (and acks)."""

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.last: Any = None

    def declare_output_fields(self, declarer: Any) -> None:
        pass

    def execute(self, tuple: Any) -> None:  # noqa: A002
        self.last = tuple.values
        self.collector.ack(tuple)


def build_topology(parallelism: int = 2, limit: int | None = None, window: int = WINDOW,
                   interval: int = INTERVAL) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(limit=limit), parallelism=1)
    builder.set_bolt("split", SplitSentence(), parallelism=parallelism).shuffle_grouping("sentences")
    builder.set_bolt("top", TopWords().with_window(Count(window), Count(interval))).global_grouping("split")
    builder.set_bolt("report", Report()).shuffle_grouping("top")
    return builder.create_topology()


CONF = Config()
CONF.set_max_spout_pending(5000)
CONF.set_message_timeout_secs(30)


if __name__ == "__main__":
    from squall.cli import main

    sys.exit(main(["run", __file__] + sys.argv[1:]))
