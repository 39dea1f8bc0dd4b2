"""
Word count topology
"""

from squall.streamparse import Grouping, Topology  # noqa: I001 - as `sparse quickstart` writes it

from bolts.wordcount import WordCountBolt
from spouts.words import WordSpout


class WordCount(Topology):
    word_spout = WordSpout.spec()
    count_bolt = WordCountBolt.spec(inputs={word_spout: Grouping.fields("word")}, par=2)
