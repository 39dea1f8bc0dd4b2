"""A word count behind a Structured Streaming query's foreachBatch, three ways, on the same files:
a `TopologySink` (rows handed to the spout tasks on the executors), a `TridentSink` (each batch one
Trident batch; its rows pass through the driver) and plain PySpark in foreachBatch (split, explode,
group, collect: no per-row guarantee). Prints ONE JSON line; progress goes to stderr.

For each: `rows_per_sec` from the query's start until every file is in, `driver_cpu_us_per_row`
(this Python process's CPU, all threads, over the rows), and for the sinks the mean seconds of a
batch and of its hand-off (`write_secs`: the Spark job writing the partitions' rows). A sink's
topology runs waves while it waits for the next batch: `driver_idle_cores` is what those cost the
driver, by time.

    .venv/bin/python bench/sink.py [--rows 400000] [--files 8] [--master local[2,4]]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from squall import BasicBolt, TopologyBuilder  # noqa: E402
from squall.engine.spark.session import get_or_create_session  # noqa: E402
from squall.spark import SparkBatchSpout, TopologySink, TridentSink  # noqa: E402
from squall.trident import BaseFunction, Count, MemoryMapState, TridentTopology  # noqa: E402

IDLE_SECS = 3.0
WORDS = "the cow jumped over the moon an apple a day keeps the doctor away".split()


class Split(BasicBolt):
    def declare_output_fields(self, d: Any) -> None:
        d.declare(["word"])

    def execute(self, t: Any, collector: Any) -> None:
        for w in t[1].split():
            collector.emit([w])


class CountWords(BasicBolt):
    def declare_output_fields(self, d: Any) -> None:
        pass

    def prepare(self, conf: dict, context: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, t: Any, collector: Any) -> None:
        w = t[0]
        self.counts[w] = self.counts.get(w, 0) + 1


class TridentSplit(BaseFunction):
    def execute(self, t: Any, collector: Any) -> None:
        for w in t[0].split():
            collector.emit([w])


def write_files(directory: str, rows: int, files: int) -> None:
    per = rows // files
    for f in range(files):
        ids = range(f * per, (f + 1) * per)
        sentences = [" ".join(WORDS[(i + k) % len(WORDS)] for k in range(6 + i % 5)) for i in ids]
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "sentence": sentences}),
                       os.path.join(directory, f"part-{f:03d}.parquet"))


def run_query(spark: Any, src: str, ckpt: str, fn: Any, rows: int) -> dict:
    df = spark.readStream.schema("id long, sentence string").option("maxFilesPerTrigger", 1).parquet(src)
    cpu0, t0 = time.process_time(), time.perf_counter()
    query = df.writeStream.foreachBatch(fn).option("checkpointLocation", ckpt).start()
    query.processAllAvailable()
    secs, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    seen = sum(p["numInputRows"] for p in query.recentProgress)
    query.stop()
    if seen != rows:
        raise SystemExit(f"the query read {seen} rows, {rows} written")
    return {"rows_per_sec": round(rows / secs), "secs": round(secs, 2),
            "driver_cpu_us_per_row": round(cpu / rows * 1e6, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--master", default="local[2,4]")
    args = ap.parse_args()
    rows = args.rows // args.files * args.files
    work = tempfile.mkdtemp(prefix="squall-bench-sink-")
    try:
        src = os.path.join(work, "src")
        os.makedirs(src)
        write_files(src, rows, args.files)
        spark = get_or_create_session(args.master, app_name="bench-sink")
        out: dict[str, Any] = {"bench": "sink", "rows": rows, "files": args.files, "master": args.master}

        print("plain foreachBatch ...", file=sys.stderr)
        from pyspark.sql import functions as F  # noqa: PLC0415, N812 - Spark's own idiom

        def plain(batch_df: Any, batch_id: int) -> None:
            batch_df.select(F.explode(F.split("sentence", " ")).alias("word")).groupBy("word").count().collect()

        out["plain_foreach_batch"] = run_query(spark, src, os.path.join(work, "ck0"), plain, rows)

        print("TopologySink ...", file=sys.stderr)
        b = TopologyBuilder()
        b.set_bolt("split", Split()).shuffle_grouping("rows")
        b.set_bolt("count", CountWords()).fields_grouping("split", ["word"])
        sink = TopologySink(b)
        batches: list[dict] = []

        def topology_sink(batch_df: Any, batch_id: int) -> None:
            sink(batch_df, batch_id)
            batches.append(sink.last_batch)

        out["topology_sink"] = run_query(spark, src, os.path.join(work, "ck1"), topology_sink, rows)
        out["topology_sink"]["batch_secs_mean"] = round(sum(x["secs"] for x in batches) / len(batches), 3)
        out["topology_sink"]["write_secs_mean"] = round(sum(x["write_secs"] for x in batches) / len(batches), 3)
        out["topology_sink"]["acked"] = sum(x["acked"] for x in batches)
        cpu0 = time.process_time()
        time.sleep(IDLE_SECS)  # the topology waits for the next batch: its waves' cost by time, not by row
        out["topology_sink"]["driver_idle_cores"] = round((time.process_time() - cpu0) / IDLE_SECS, 3)
        sink.close()

        print("TridentSink ...", file=sys.stderr)
        t = TridentTopology()
        (t.new_stream("rows", SparkBatchSpout(["sentence"])).each(["sentence"], TridentSplit(), ["word"])
         .group_by(["word"]).persistent_aggregate(MemoryMapState.factory("transactional"), Count(), ["count"]))
        tsink = TridentSink(t)
        tbatches: list[dict] = []

        def trident_sink(batch_df: Any, batch_id: int) -> None:
            tsink(batch_df, batch_id)
            tbatches.append(tsink.last_batch)

        out["trident_sink"] = run_query(spark, src, os.path.join(work, "ck2"), trident_sink, rows)
        out["trident_sink"]["batch_secs_mean"] = round(sum(x["secs"] for x in tbatches) / len(tbatches), 3)
        tsink.close()
        print(json.dumps(out))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
