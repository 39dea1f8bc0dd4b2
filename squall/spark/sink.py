"""`TopologySink`: a Storm topology as the `foreachBatch` sink of a Structured Streaming query.

Spark retries a micro-batch whole and stops the query when one record raises; a topology acks,
replays and dead-letters each row. The sink gives a query that: each call hands the batch's rows
to the topology's spout tasks (squall.spark.rows, not through the driver) and returns when every
row is acked or dead-lettered, so Spark commits the batch's offsets only then.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import threading
import time
import uuid
from typing import Any

from squall.api.config import Config, effective_conf
from squall.api.topology import TopologyBuilder
from squall.engine.cluster import LocalCluster
from squall.observe.dead_letter import make_sink
from squall.spark.rows import RowsSpout, done_path, manifest_path, write_json, write_partitions

log = logging.getLogger("squall.spark")

KEEP_HANDOFFS = 4  # a hand-off's files are removed this many hand-offs later (a rolled-back spout re-reads them)
PROGRESS_EVERY_SECS = 60.0


class TopologySink:
    """`df.writeStream.foreachBatch(TopologySink(builder))`: every row of every micro-batch runs
    through the topology in `builder` (bolts subscribing to `spout_id`), with Storm's guarantee.

    The topology is submitted on the query's SparkSession at the first call and runs until
    `close()`. One core of the session stays free of slots, for the query's own tasks.
    """

    def __init__(self, builder: TopologyBuilder, conf: dict | None = None, name: str | None = None,
                 spout_id: str = "rows", spout_parallelism: int = 1):
        if not isinstance(builder, TopologyBuilder):
            raise TypeError(f"TopologySink needs a TopologyBuilder holding the bolts, got {type(builder).__name__}")
        if spout_id in builder._specs:
            raise ValueError(f"TopologySink adds its own spout as {spout_id!r}, and the builder already has a "
                             f"component of that id; pick another spout_id")
        self.builder = builder
        self.conf = dict(conf or {})
        self.name = name or f"sink-{spout_id}"
        self.spout_id = spout_id
        self.spout_parallelism = int(spout_parallelism)
        self.last_batch: dict[str, Any] | None = None
        self.fields: list[str] | None = None
        self.cluster: LocalCluster | None = None
        self.directory: str | None = None
        self._seq = 0
        self._spout: RowsSpout | None = None
        self._lock = threading.Lock()
        self._dead_letters = make_sink(effective_conf(self.conf))

    # -- the foreachBatch call ------------------------------------------------------------------

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        with self._lock:
            t0 = time.perf_counter()
            if self.cluster is None:
                self._start(batch_df)
            elif list(batch_df.columns) != self.fields:
                raise ValueError(f"{self.name}: batch {batch_id} has columns {list(batch_df.columns)}, the topology's "
                                 f"spout emits {self.fields}; a query's schema cannot change under a running sink")
            seq = self._seq + 1
            parts = write_partitions(batch_df, self.directory, seq)
            t1 = time.perf_counter()
            rows = sum(p[2] for p in parts)
            write_json(manifest_path(self.directory, seq), {"seq": seq, "batch_id": int(batch_id), "parts": parts})
            self._seq = seq
            done = self._wait(seq, batch_id, rows)
            dead = [d for one in done for d in one["dead"]]
            for record in dead:
                self._dead_letters.write(record)
                log.error("%s: row %s of batch %d dead-lettered after %d attempts: %s", self.name,
                          record["msg_id"][1], batch_id, record["attempts"], record["error"])
            self._forget(seq - KEEP_HANDOFFS)
            self.last_batch = {"batch_id": int(batch_id), "rows": rows,
                               "acked": sum(d["acked"] for d in done), "dead_lettered": len(dead),
                               "replayed": sum(d["replayed"] for d in done), "secs": time.perf_counter() - t0,
                               "write_secs": t1 - t0}

    def _start(self, batch_df: Any) -> None:
        from squall.engine.spark.slots import checkpoint_dir, slots_leaving_a_core  # noqa: PLC0415 - pyspark

        spark = batch_df.sparkSession
        sc = spark.sparkContext
        conf = slots_leaving_a_core(sc, effective_conf(self.conf), type(self).__name__)
        base = checkpoint_dir(sc, conf)
        if "://" in base and not base.startswith("file:"):
            raise ValueError(f"{self.name}: the rows of each batch go through squall.checkpoint.dir, which must be a "
                             f"directory every executor mounts (a shared filesystem), not {base!r}")
        base = base.removeprefix("file:")
        conf[Config.SQUALL_CHECKPOINT_DIR] = base
        self.directory = os.path.join(base, f"squall-sink-{self.name}-{uuid.uuid4().hex[:8]}")
        os.makedirs(self.directory)
        self._seq = 0
        self.fields = list(batch_df.columns)
        if self._spout is None:
            self._spout = RowsSpout(self.fields, self.directory)
            self.builder.set_spout(self.spout_id, self._spout, self.spout_parallelism)
        else:  # submitted again after close(): the same spout, this run's columns and files
            self._spout.fields, self._spout.directory = self.fields, self.directory
        topology = self.builder.create_topology()
        cluster = LocalCluster(engine="spark", spark=spark)
        try:
            cluster.submit_topology(self.name, conf, topology)
        except BaseException:
            cluster.shutdown()
            raise
        self.cluster = cluster

    def _wait(self, seq: int, batch_id: int, rows: int) -> list[dict]:
        """Every spout task's done file of hand-off `seq`; raises if the topology stopped."""
        paths = [done_path(self.directory, seq, i) for i in range(self.spout_parallelism)]
        started = last_note = time.monotonic()
        sleep = 0.001
        while True:
            if all(os.path.exists(p) for p in paths):
                out = []
                for p in paths:
                    with open(p, encoding="utf-8") as f:
                        out.append(json.load(f))
                return out
            crash = self.cluster.get_crash(self.name)
            if crash is not None:
                raise RuntimeError(f"{self.name}: the topology stopped during batch {batch_id}: {crash}") from crash
            now = time.monotonic()
            if now - last_note > PROGRESS_EVERY_SECS:
                last_note = now
                log.info("%s: batch %d (%d rows) still running after %.0f s", self.name, batch_id, rows, now - started)
            time.sleep(sleep)
            sleep = min(0.02, sleep * 1.5)

    def _forget(self, upto: int) -> None:
        """Remove the files of hand-offs up to `upto` (long done)."""
        if upto < 1:
            return
        for path in glob.glob(os.path.join(self.directory, "*")):
            name = os.path.basename(path)
            try:
                n = int(name.split("-")[1].split(".")[0])
            except (IndexError, ValueError):
                continue
            if n <= upto:
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.remove(path)

    # -- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill the topology and remove the sink's files; a later call submits it again."""
        with self._lock:
            if self.cluster is not None:
                self.cluster.shutdown()
                self.cluster = None
            if self.directory is not None:
                shutil.rmtree(self.directory, ignore_errors=True)
                self.directory = None

    def __enter__(self) -> TopologySink:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TopologySink({self.name!r}, spout_id={self.spout_id!r})"

