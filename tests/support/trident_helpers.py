"""Functions, spouts and data used by the Trident tests (module level: picklable for Spark)."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from typing import Any

from squall.trident import BaseFunction, OpaqueTransactionalSpout

WORDS = "apple banana cherry date elder fig grape hazel iris juniper kiwi lemon mango".split()


class Split(BaseFunction):
    def execute(self, t, collector):
        for w in t[0].split():
            collector.emit([w])


class FailFirstTime(BaseFunction):
    """Raises the first time it sees `trigger` (a marker file says it happened: works across
    processes), then passes everything through."""

    def __init__(self, marker: str, trigger: str):
        self.marker, self.trigger = marker, trigger

    def execute(self, t, collector):
        if t[0] == self.trigger and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write("failed once")
            raise RuntimeError(f"first attempt fails on {self.trigger!r}")
        collector.emit([t[0]])


def write_corpus(directory: str, files: int, lines: int, seed: int = 7) -> Counter:
    """JSON-lines files of random sentences; returns the true word counts."""
    rng = random.Random(seed)
    truth: Counter = Counter()
    os.makedirs(directory, exist_ok=True)
    for i in range(files):
        with open(os.path.join(directory, f"part-{i:04d}.jsonl"), "w") as f:
            for _ in range(lines):
                words = rng.choices(WORDS, k=rng.randint(1, 8))
                truth.update(words)
                f.write(json.dumps({"sentence": " ".join(words)}) + "\n")
    return truth


class ShiftingOpaqueSpout(OpaqueTransactionalSpout):
    """An opaque spout over the same JSON-lines files whose batches change between attempts:
    each call takes a random number of lines from where the previous batch ended."""

    def __init__(self, directory: str, max_batch: int = 300):
        self.directory = directory
        self.max_batch = max_batch
        self.rng = random.Random()

    def get_output_fields(self) -> list[str]:
        return ["sentence"]

    def _lines(self) -> list[str]:
        if not hasattr(self, "_cache"):
            out = []
            for name in sorted(os.listdir(self.directory)):
                with open(os.path.join(self.directory, name)) as f:
                    out.extend(json.loads(line)["sentence"] for line in f if line.strip())
            self._cache = out
        return self._cache

    def emit_batch(self, txid: int, prev_meta: Any):
        lines = self._lines()
        start = prev_meta or 0
        if start >= len(lines):
            return None
        end = min(len(lines), start + self.rng.randint(1, self.max_batch))
        return [[s] for s in lines[start:end]], end

    def replay_batch(self, txid: int, prev_meta: Any, meta: Any) -> list[list]:
        return [[s] for s in self._lines()[prev_meta or 0:meta]]
