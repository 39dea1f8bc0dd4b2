"""Exactly-once word count with Trident: a directory of JSON-lines files into SQLite.

    squall run examples/trident_wordcount.py --engine local      # or --engine spark
    SQUALL_INPUT=/path/to/jsonl/dir SQUALL_STATE=/path/counts.db squall run examples/trident_wordcount.py

Each line of the input files is an object with a "sentence". Batches are byte ranges of the
files, persisted before they run; counts are committed per batch with its txid. Kill it at any
moment (Ctrl-C, or `kill -9`) and run it again: it continues where it stopped, and every count
stays exact. Without SQUALL_INPUT it writes a sample corpus to examples/data/sentences first.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

from squall import Config
from squall.trident import BaseFunction, Count, JsonLinesFileSpout, SQLiteMapState, TridentTopology

HERE = Path(__file__).resolve().parent
INPUT = os.environ.get("SQUALL_INPUT", str(HERE / "data" / "sentences"))
STATE = os.environ.get("SQUALL_STATE", str(HERE / "data" / "trident-wordcount.db"))
WORDS = "the quick brown fox jumps over lazy dog storm spark stream tuple bolt spout batch txid".split()

CONF = Config({Config.TOPOLOGY_MAX_SPOUT_PENDING: 4})


class Split(BaseFunction):
    def execute(self, t, collector):
        for w in str(t[0] or "").split():
            collector.emit([w.lower()])


def write_sample(directory: str, files: int = 20, lines: int = 2000) -> None:
    rng = random.Random(1)
    os.makedirs(directory, exist_ok=True)
    for i in range(files):
        with open(os.path.join(directory, f"part-{i:04d}.jsonl"), "w") as f:
            for _ in range(lines):
                f.write(json.dumps({"sentence": " ".join(rng.choices(WORDS, k=rng.randint(3, 10)))}) + "\n")


_counts = None
_spout_name = "sentences"


def build_topology():
    global _counts
    if not os.path.isdir(INPUT):
        if "SQUALL_INPUT" in os.environ:
            sys.exit(f"SQUALL_INPUT={INPUT} is not a directory")
        write_sample(INPUT)
    t = TridentTopology()
    _counts = (t.new_stream(_spout_name, JsonLinesFileSpout(INPUT, ["sentence"], batch_size=2000))
               .each(["sentence"], Split(), ["word"]).parallelism_hint(2)
               .group_by(["word"])
               .persistent_aggregate(SQLiteMapState.factory(STATE, "transactional"), Count(), ["count"])
               .parallelism_hint(2))
    return t.build()


def done(cluster, name) -> bool:
    """The spout's files are all committed (new lines appended later are read by the next run)."""
    return all(spout.idle for spout in cluster.spout_instances(name))


def report() -> str:
    words = sorted(WORDS)
    got = _counts.multi_get([[w] for w in words]) if _counts is not None else []
    pairs = sorted(((c or 0, w) for w, c in zip(words, got)), reverse=True)[:10]
    return "top words: " + ", ".join(f"{w} {c}" for c, w in pairs) + f"  (state: {STATE})"


if __name__ == "__main__":
    from squall.cli import main

    sys.exit(main(["run", __file__, "--seconds", "0", *sys.argv[1:]]))
