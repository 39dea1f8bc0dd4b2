"""Functions, spouts, state wrappers and data used by the Trident tests (module level:
picklable for Spark)."""

from __future__ import annotations

import json
import os
import random
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from squall.trident import BaseFunction, FixedBatchSpout, OpaqueTransactionalSpout

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
    each call takes a number of lines, drawn from (seed, txid, attempt), from where the
    previous batch ended. Give each process its own `seed` to shift batches across restarts."""

    def __init__(self, directory: str, max_batch: int = 300, seed: str = "shifting"):
        self.directory = directory
        self.max_batch = max_batch
        self.seed = seed
        self.attempts: Counter = Counter()  # txid -> emit_batch calls in this instance

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
        self.attempts[txid] += 1
        rng = random.Random(zlib.crc32(f"{self.seed}/{txid}/{self.attempts[txid]}".encode()))
        end = min(len(lines), start + rng.randint(1, self.max_batch))
        return [[s] for s in lines[start:end]], end

    def replay_batch(self, txid: int, prev_meta: Any, meta: Any) -> list[list]:
        return [[s] for s in self._lines()[prev_meta or 0:meta]]


def read_json_lines(path: Path) -> list[Any]:
    """Every record a recorder below appended to `path` (none when it was never written)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _append(path: str, record: Any) -> None:
    """One JSON line, appended: works from any process (Spark executors too)."""
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


class RecordingBatchSpout(FixedBatchSpout):
    """Storm's FixedBatchSpout that appends every batch it emits, first attempts and replays,
    as {"txid", "rows"} to `log_path`."""

    def __init__(self, log_path: str, fields: list[str], batch_size: int, *tuples: list):
        super().__init__(fields, batch_size, *tuples)
        self.log_path = log_path

    def batch_rows(self, txid: int, meta: Any) -> list[list]:
        rows = super().batch_rows(txid, meta)
        _append(self.log_path, {"txid": txid, "rows": rows})
        return rows


class CommitHooks:
    """A map state wrapped so that a test sees its commits (`on_begin`, `before_commit`,
    `after_commit`); everything else is the real state's, so the real store is exercised."""

    def __init__(self, inner: Any, partition: int, **options: Any) -> None:
        self.inner, self.partition, self.options = inner, partition, options

    def on_begin(self, txid: int) -> None:
        """Called when a commit begins."""

    def before_commit(self, txid: int) -> None:
        """Called before the commit's writes reach the store."""

    def after_commit(self, txid: int) -> None:
        """Called once the store holds the commit."""

    def begin_commit(self, txid: int) -> None:
        self.on_begin(txid)
        self.inner.begin_commit(txid)

    def commit(self, txid: int) -> None:
        self.before_commit(txid)
        self.inner.commit(txid)
        self.after_commit(txid)

    def __getattr__(self, name: str) -> Any:  # multi_get, multi_update, abort, close...
        if name == "inner":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


class HookedStateFactory:
    """A real state factory whose states are wrapped in `hooks` (a `CommitHooks` subclass,
    given `options`); the coordinator's meta store is the real one."""

    def __init__(self, inner: Any, hooks: type[CommitHooks], **options: Any) -> None:
        self.inner, self.hooks, self.options = inner, hooks, options
        self.kind = inner.kind

    def make_state(self, conf: dict, partition_index: int, num_partitions: int) -> CommitHooks:
        return self.hooks(self.inner.make_state(conf, partition_index, num_partitions), partition_index,
                          **self.options)

    def meta_store(self, conf: dict | None = None) -> Any:
        return self.inner.meta_store(conf)

    def describe(self) -> str:
        return self.inner.describe()


class RecordingState(CommitHooks):
    """Appends each commit as {"partition", "txid", "keys"} (the keys it updated) to the
    JSON-lines file `options["log_path"]`."""

    def on_begin(self, txid: int) -> None:
        self.keys: list[list] = []

    def multi_update(self, keys: list[list], updaters: list) -> list:
        self.keys.extend(keys)
        return self.inner.multi_update(keys, updaters)

    def after_commit(self, txid: int) -> None:
        _append(self.options["log_path"], {"partition": self.partition, "txid": txid, "keys": self.keys})
