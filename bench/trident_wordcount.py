"""Trident word count throughput on Spark local[2]: tuples/s and batches/s into memory, SQLite
and PostgreSQL state, for transactional and opaque state, and the cost of exactly-once as the
ratio against the same topology with non-transactional state. Prints ONE JSON line.

    .venv/bin/python bench/trident_wordcount.py [--seconds 10] [--engine spark|local]
        [--backends memory,sqlite,postgres]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from squall import Config, LocalCluster  # noqa: E402
from squall.trident import (  # noqa: E402
    BaseFunction,
    Count,
    FixedBatchSpout,
    MemoryMapState,
    PostgresMapState,
    SQLiteMapState,
    TridentTopology,
)

WORDS = [f"w{i}" for i in range(2000)]
KINDS = ["non-transactional", "transactional", "opaque"]


class Split(BaseFunction):
    def execute(self, t, collector):
        for w in t[0].split():
            collector.emit([w])


def sentences(n: int) -> list[list[str]]:
    rng = random.Random(5)
    return [[" ".join(rng.choices(WORDS, k=rng.randint(5, 12)))] for _ in range(n)]


def factory(backend: str, kind: str, tmp: str):
    if backend == "memory":
        return MemoryMapState.factory(kind)
    if backend == "sqlite":
        return SQLiteMapState.factory(os.path.join(tmp, f"{kind}-{uuid.uuid4().hex[:6]}.db"), kind)
    return PostgresMapState.factory(os.environ.get("SQUALL_PG_DSN"), kind, table=f"bench_{uuid.uuid4().hex[:8]}")


def run_one(engine: str, spark, backend: str, kind: str, seconds: float, data: list, batch: int, tmp: str) -> dict:
    spout = FixedBatchSpout(["sentence"], batch, *data)
    spout.set_cycle(True)
    f = factory(backend, kind, tmp)
    t = TridentTopology()
    (t.new_stream("s", spout).each(["sentence"], Split(), ["word"]).parallelism_hint(2)
     .group_by(["word"]).persistent_aggregate(f, Count(), ["count"]).parallelism_hint(2))
    conf = {Config.TOPOLOGY_MAX_SPOUT_PENDING: 2, "squall.trident.memory.on.spark": True,
            Config.SQUALL_WAVE_MAX_TUPLES: batch * 2}
    kw = {"engine": engine, "spark": spark} if engine == "spark" else {"engine": "local"}
    try:
        with LocalCluster(**kw) as cluster:
            cluster.submit_topology("bench", conf, t.build())
            spout_exec = cluster.spout_instances("bench")[0]
            time.sleep(min(3.0, seconds / 3))  # warm-up
            c0, s0, t0 = spout_exec.batches_committed, _split_executed(cluster), time.perf_counter()
            time.sleep(seconds)
            c1, s1, t1 = spout_exec.batches_committed, _split_executed(cluster), time.perf_counter()
    finally:
        drop = getattr(f, "drop", None)
        if backend == "postgres" and drop is not None:
            drop()
    secs = t1 - t0
    batches = c1 - c0
    words_per_sentence = sum(len(s[0].split()) for s in data) / len(data)
    return {"batches_per_sec": round(batches / secs, 2),
            # tuples: each sentence and each word, counted for the committed batches
            "tuples_per_sec": round(batches * batch * (1 + words_per_sentence) / secs),
            "sentences_executed_per_sec": round((s1 - s0) / secs)}


def _split_executed(cluster) -> int:
    st = cluster.get_topology_stats("bench")
    return sum(v.get("executed") or 0 for k, v in st.items() if k.endswith("-b0"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="spark", choices=["spark", "local"])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--backends", default="memory,sqlite,postgres")
    args = ap.parse_args()
    spark = None
    if args.engine == "spark":
        from squall.engine.spark.session import get_or_create_session

        spark = get_or_create_session("local[2,4]", app_name="bench-trident")
    data = sentences(20000)
    out: dict = {"bench": "trident_wordcount", "engine": args.engine, "master": "local[2]" if spark else None,
                 "batch_size": args.batch, "seconds": args.seconds, "goal_exactly_once_cost_max": 1.3}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            res = {}
            for kind in KINDS:
                try:
                    res[kind] = run_one(args.engine, spark, backend, kind, args.seconds, data, args.batch, tmp)
                except Exception as e:  # noqa: BLE001 - a missing server is reported, not fatal
                    res[kind] = {"error": f"{type(e).__name__}: {e}"[:200]}
                print(f"{backend} {kind}: {res[kind]}", file=sys.stderr)
            base = res["non-transactional"].get("tuples_per_sec")
            for kind in ("transactional", "opaque"):
                v = res[kind].get("tuples_per_sec")
                if base and v:
                    res[kind]["exactly_once_cost"] = round(base / v, 3)
            out[backend] = res
    print(json.dumps(out))


if __name__ == "__main__":
    main()
