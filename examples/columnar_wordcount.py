"""Word count with columnar bolts: whole Arrow batches per task and wave, Storm's per-sentence
replay kept.

    sentences (ColumnSentenceSpout) --shuffle--> split (ColumnSplit) --fields["word"]--> count (ColumnCount)

The spout emits sentences as one column per call (`emit_batch(columns, msg_ids)`: a tree per
sentence); the split bolt splits them with `pyarrow.compute` and anchors every word to its
sentence with one index array; the count bolt counts by key per batch and emits each word's
running count, anchored to the word's first row in the batch. A failed sentence is replayed alone.

Run it:

    python examples/columnar_wordcount.py --engine local --seconds 10
    squall run examples/columnar_wordcount.py --engine spark
"""

from __future__ import annotations

import random
import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from squall import Config, Spout, StormTopology, TopologyBuilder
from squall.columnar import ColumnarBolt

WORDS = (
    "the quick brown fox jumps over lazy dog storm spark stream tuple bolt spout acker tree "
    "anchor replay wave batch cluster driver worker task field shuffle group count split word "
    "sentence river cloud rain thunder lightning apple orange banana cherry mango lemon grape "
    "north south east west red green blue"
).split()
MIN_WORDS, MAX_WORDS = 5, 12
POOL = 1 << 14  # distinct sentences; a msg id picks one by a hash, so a replay finds it again
MAX_RETRIES = 3
WAVE_TUPLES = 100_000  # a spout task's emits per wave: it stops at the first call past this
SPOUT_BATCH = 8192  # ColumnSentenceSpout's rows per call, so a full wave holds up to 106,496


def sentence_pool(seed: int, size: int = POOL) -> pa.Array:
    rng = random.Random(seed)
    return pa.array([" ".join(rng.choices(WORDS, k=rng.randint(MIN_WORDS, MAX_WORDS))) for _ in range(size)])


def sentences_for(pool: pa.Array, ids: np.ndarray) -> pa.Array:
    """The sentence of each msg id (a multiplicative hash of the id picks it from the pool)."""
    with np.errstate(over="ignore"):
        pick = (ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)
    return pool.take(pa.array((pick % np.uint64(len(pool))).astype(np.int64)))


class ColumnSentenceSpout(Spout):
    """`batch` sentences per call as one Arrow column, msg id per sentence; failed ones are
    emitted again (same id, same sentence) before new ones, at most `max_retries` times.
    `limit`: at most this many new sentences per spout task (None: no end)."""

    def __init__(self, batch: int = SPOUT_BATCH, limit: int | None = None, seed: int = 42,
                 max_retries: int = MAX_RETRIES):
        self.batch, self.limit, self.seed, self.max_retries = batch, limit, seed, max_retries

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.task_index = context.this_task_index
        self.ntasks = len(context.component_tasks(context.this_component_id))
        self.pool = sentence_pool(self.seed)
        self.emitted = self.acked = self.failed = self.given_up = 0
        self.retries: dict[int, int] = {}
        self.replay: list[int] = []

    def next_tuple(self) -> None:
        if self.replay:
            ids, self.replay = np.array(self.replay, np.int64), []
        else:
            n = self.batch if self.limit is None else min(self.batch, self.limit - self.emitted)
            if n <= 0:
                return
            ids = (np.arange(self.emitted, self.emitted + n, dtype=np.int64) * self.ntasks) + self.task_index
            self.emitted += n
        self.collector.emit_batch({"sentence": sentences_for(self.pool, ids)}, msg_ids=ids)

    def ack(self, msg_id: Any) -> None:
        self.acked += 1

    def ack_batch(self, msg_ids: list) -> None:  # a wave's acks at once (squall's own, see Spout.ack_batch)
        self.acked += len(msg_ids)

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        self.failed += 1
        tries = self.retries.get(msg_id, 0)
        if tries >= self.max_retries:
            self.given_up += 1
            self.retries.pop(msg_id, None)
            return
        self.retries[msg_id] = tries + 1
        self.replay.append(msg_id)


class ColumnSplit(ColumnarBolt):
    """Sentences -> words, each anchored to its sentence's row."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])

    def execute_batch(self, batch: pa.RecordBatch, collector: Any) -> None:
        words = pc.split_pattern(batch.column(0), " ")
        anchors = np.repeat(np.arange(batch.num_rows), pc.list_value_length(words).to_numpy())
        collector.emit_batch({"word": pc.list_flatten(words)}, anchors)


class ColumnCount(ColumnarBolt):
    """Running count per word: per batch, counts by key, emits [word, count] once per distinct
    word (anchored to its first row); every row is acked when the batch returns."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])

    def prepare(self, conf: dict, context: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute_batch(self, batch: pa.RecordBatch, collector: Any) -> None:
        enc = batch.column(0).dictionary_encode()
        keys = enc.indices.to_numpy()
        words = enc.dictionary.to_pylist()  # distinct words of the batch: a Python step per key only
        per_key = np.bincount(keys, minlength=len(words)).tolist()
        counts = self.counts
        totals = [counts.get(w, 0) + k for w, k in zip(words, per_key)]
        counts.update(zip(words, totals))
        # the dictionary lists words in order of first appearance: a word's first row is where
        # the running maximum of the keys steps up (no sort)
        top = np.maximum.accumulate(keys)
        first = np.flatnonzero(np.concatenate(([True], top[1:] > top[:-1])))
        collector.emit_batch({"word": enc.dictionary, "count": pa.array(totals, pa.int64())}, first)


def build_topology(parallelism: int = 2, limit: int | None = None) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("sentences", ColumnSentenceSpout(limit=limit), parallelism=1)
    builder.set_bolt("split", ColumnSplit(), parallelism=parallelism).shuffle_grouping("sentences")
    builder.set_bolt("count", ColumnCount(), parallelism=parallelism).fields_grouping("split", ["word"])
    return builder.create_topology()


CONF = Config()
# Room for two full waves in flight (squall.waves.in.flight): the next wave is built while one
# runs, and a limit of 2 x 100,000 cut every other wave to 98,304 (one spout call less).
CONF.set_max_spout_pending(2 * (WAVE_TUPLES + SPOUT_BATCH))
CONF.set_message_timeout_secs(30)
CONF[Config.SQUALL_WAVE_MAX_TUPLES] = WAVE_TUPLES


if __name__ == "__main__":
    from squall.cli import main

    sys.exit(main(["run", __file__] + sys.argv[1:]))
