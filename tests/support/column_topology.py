"""Columnar bolts for the KafkaColumnSpout tests: the two-bolt scenario (parse -> sink) of the
broker tests, with failures given per row (`fail_rows`), as a columnar bolt should."""

from __future__ import annotations

import json
import random
import zlib
from typing import Any

import numpy as np
import pyarrow as pa

from squall import TopologyBuilder
from squall.columnar import ColumnarBolt


class _FlakyColumns(ColumnarBolt):
    """Fails `fail_rate` of its input rows at random (seeded per component and task)."""

    def __init__(self, fail_rate: float = 0.0, seed: int = 7):
        self.fail_rate = fail_rate
        self.seed = seed

    def prepare(self, conf: dict, context: Any) -> None:
        key = f"{self.seed}/{context.this_component_id}/{context.this_task_index}"
        self.rng = random.Random(zlib.crc32(key.encode()))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id"])

    def unlucky(self, n: int) -> np.ndarray:
        return np.array([self.rng.random() < self.fail_rate for _ in range(n)], np.bool_)


class ColumnParse(_FlakyColumns):
    """[..., value] -> [id]: the JSON value's "id"; fails the rows of {"poison": true} (always)
    and `fail_rate` of the others at random."""

    def __init__(self, fail_rate: float = 0.0, seed: int = 7, fail_once: Any = None):
        super().__init__(fail_rate, seed)
        self.fail_once = fail_once  # an id failed on its first pass only
        self.failed_once = False

    def execute_batch(self, batch: Any, collector: Any) -> None:
        msgs = [json.loads(v) for v in batch.column("value").to_pylist()]
        bad = self.unlucky(len(msgs)) | np.array([bool(m.get("poison")) for m in msgs], np.bool_)
        for i, m in enumerate(msgs):
            if m["id"] == self.fail_once and not self.failed_once:
                self.failed_once = bad[i] = True
        collector.fail_rows(bad)
        good = np.flatnonzero(~bad)
        collector.emit_batch({"id": pa.array([msgs[i]["id"] for i in good], pa.int64())}, anchors=good)


class ColumnSink(_FlakyColumns):
    """[id] -> [id] (the captured output); fails `fail_rate` of its rows at random."""

    def __init__(self, fail_rate: float = 0.0, seed: int = 11):
        super().__init__(fail_rate, seed)

    def execute_batch(self, batch: Any, collector: Any) -> None:
        bad = self.unlucky(batch.num_rows)
        collector.fail_rows(bad)
        good = np.flatnonzero(~bad)
        collector.emit_batch({"id": batch.column("id").take(pa.array(good))}, anchors=good)


def column_topology(spout: Any, fail_rate: float = 0.01, parallelism: int = 2, parse: Any = None):
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("parse", parse or ColumnParse(fail_rate), parallelism=parallelism).shuffle_grouping("src")
    b.set_bolt("sink", ColumnSink(fail_rate), parallelism=parallelism).shuffle_grouping("parse")
    return b.create_topology()
