"""Storm's Trident tutorial: a word count kept in MemoryMapState, queried with DRPC.

    python examples/trident_drpc.py                  # Spark (embedded local[*])
    python examples/trident_drpc.py --engine local

The "sentences" stream counts words into a MemoryMapState; the DRPC function "words" splits
its argument into words, reads each word's count from that state (MapGet), drops the words
it has never seen (FilterNull) and sums the rest: `drpc.execute("words", "cat the dog")`
returns the JSON text of the result tuples, e.g. "[[5]]". The same code runs on both engines
(on Spark the memory state's dict stays in the driver).
"""

from __future__ import annotations

import argparse
import os
import sys

from squall import LocalCluster
from squall.trident import (
    BaseFunction,
    Count,
    FilterNull,
    FixedBatchSpout,
    LocalDRPC,
    MapGet,
    MemoryMapState,
    Sum,
    TridentTopology,
)

SENTENCES = [["the cow jumped over the moon"], ["the man went to the store and bought some candy"],
             ["four score and seven years ago"], ["how many apples can you eat"], ["to be or not to be the person"]]


class Split(BaseFunction):
    def execute(self, t, collector):
        for word in t[0].split(" "):
            if word:
                collector.emit([word])


def build(drpc: LocalDRPC, state_factory=None):
    """The tutorial's topology; returns (topology, the word counts' TridentState)."""
    t = TridentTopology()
    word_counts = (t.new_stream("spout1", FixedBatchSpout(["sentence"], 3, *SENTENCES))
                   .each(["sentence"], Split(), ["word"]).parallelism_hint(2)
                   .group_by(["word"])
                   .persistent_aggregate(state_factory or MemoryMapState.factory("transactional"), Count(), ["count"])
                   .parallelism_hint(2))
    (t.new_drpc_stream("words", drpc)
     .each(["args"], Split(), ["word"])
     .group_by(["word"])
     .state_query(word_counts, ["word"], MapGet(), ["count"])
     .each(["count"], FilterNull())
     .aggregate(["count"], Sum(), ["sum"]))
    return t.build(), word_counts


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["spark", "local"], default="spark")
    ap.add_argument("queries", nargs="*", default=["cat the dog jumped", "the man", "nothing known here"])
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    drpc = LocalDRPC()
    topology, word_counts = build(drpc)
    with LocalCluster(engine=args.engine) as cluster:
        cluster.submit_topology("wordcount-drpc", {}, topology)
        cluster.wait_idle(timeout_secs=300)  # every sentence batch counted and committed
        print("count of 'the':", word_counts.multi_get([["the"]])[0])
        for q in args.queries:
            print(f"words({q!r}) -> {drpc.execute('words', q)}")
    drpc.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
