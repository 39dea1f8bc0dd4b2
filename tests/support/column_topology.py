"""Columnar bolts for the KafkaColumnSpout tests: the two-bolt scenario (parse -> sink) of the
broker tests, with failures given per row (`fail_rows`), as a columnar bolt should."""

from __future__ import annotations

import json
import random
import zlib
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa

from squall import LocalCluster, TopologyBuilder
from squall.columnar import ColumnarBolt
from squall.connectors.dead_letters import DL_ATTEMPTS, DL_REASON
from tests.support.broker_services import wait_until
from tests.support.broker_topology import Recorder, captured_ids, scenario_conf


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


POISON = b'{"id": "poison", "poison": true}'


def run_10k_scenario(admin: Any, source: str, spout: Any, rec: Recorder, cluster_kwargs: dict, n: int,
                     max_retries: int) -> None:
    """The column spouts' 10,000-message scenario (the messages and POISON already published to
    `source`): 1% of the rows of each columnar bolt fail at random; every message is processed
    and acked at the broker exactly once, nothing is left at the source, and the poison message
    (failed on every pass) is dead-lettered alone after max_retries retries."""
    with LocalCluster(capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("col-10k", scenario_conf(cluster_kwargs["engine"]), column_topology(spout, 0.01))
        wait_until(lambda: rec.n_acked() >= n and rec.dead, 90,
                   lambda: f"acked {rec.n_acked()}/{n}, dead {len(rec.dead)}, spouts {rec.counters()}")
        seen = captured_ids(cluster, "col-10k")
        cluster.kill_topology("col-10k")  # closes the spout: its last acks (commits) go out
    assert set(seen) == set(range(n)), f"never processed: {sorted(set(range(n)) - set(seen))[:10]}"
    assert set(rec.acked) == set(range(n)) and set(rec.acked.values()) == {1}, \
        f"acked more than once: {[k for k, c in rec.acked.items() if c != 1][:10]}"
    [(key, _m, failure)] = rec.dead
    assert key == "poison" and failure.kind == "failed" and failure.component == "parse", failure
    assert failure.attempts == max_retries + 1, failure
    totals = sum((Counter(c) for c in rec.counters()), Counter())
    assert totals["acked"] == n and totals["dead_lettered"] == 1, totals
    assert totals["retried"] > max_retries, totals  # random failures were retried too
    wait_until(lambda: admin.settled(source), 10, lambda: f"{admin.left(source)} message(s) left at the source")
    [(body, info)] = admin.dead_letters(source)
    assert body == POISON and info[DL_REASON] == "failed" and info[DL_ATTEMPTS] == str(max_retries + 1)
