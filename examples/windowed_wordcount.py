"""Windowed word count: the most frequent words of the last 10,000 words, every 1,000 words.

    sentences (RandomSentenceSpout) --shuffle--> split (SplitSentence) --global--> top (TopWords)

`TopWords` is a windowed bolt (squall.windowing): a sliding count window of 10,000 words that
fires every 1,000. Its emit is anchored to every word of the window, and each word is acked as
soon as no later window can hold it, so a sentence is acked once its words have left the windows.

Run it:

    python examples/windowed_wordcount.py --engine local --seconds 10
    squall run examples/windowed_wordcount.py --engine spark
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

from squall import Bolt, Config, StormTopology, TopologyBuilder
from squall.windowing import BaseWindowedBolt, Count

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wordcount import RandomSentenceSpout, SplitSentence  # noqa: E402 - the word stream of examples/wordcount.py

WINDOW, INTERVAL = 10_000, 1_000


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
        counts.update(v[0] for v in window.new_values())
        counts.subtract(v[0] for v in window.expired_values())
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
    builder.set_spout("sentences", RandomSentenceSpout(limit=limit), parallelism=1)
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
