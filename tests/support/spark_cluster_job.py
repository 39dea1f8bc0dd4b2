"""Runs examples/wordcount.py's topology with a bounded spout and prints one JSON line: the final
count per word and the spout's counters. Used by tests/engines/test_spark_cluster.py, which runs it in a
subprocess against a real Spark standalone master (a process may hold only one SparkContext, and
the test process already has the `local` one of tests/conftest.py):

    python tests/support/spark_cluster_job.py spark://127.0.0.1:7077 --limit 2000

The test runs `run_wordcount` in its own process too, on the local engine, and compares.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "wordcount.py"
TOPOLOGY = "wordcount-cluster"


def load_example() -> ModuleType:
    """examples/wordcount.py as the CLI loads it: its code pickled by value, since Spark's Python
    workers cannot import it by name."""
    from pyspark import cloudpickle

    from squall.cli import load_topology_module

    module = load_topology_module(str(EXAMPLE))
    try:
        cloudpickle.register_pickle_by_value(module)
    except ValueError:  # already registered
        pass
    return module


def expected_counts(module: ModuleType, limit: int) -> dict[str, int]:
    """The words of the first `limit` sentences of the (single) spout task, straight from its generator."""
    spout = module.RandomSentenceSpout(limit=limit)
    spout.rng = module.random.Random(spout.seed * 1_000_003 + 0)  # as open() seeds task 0
    return dict(Counter(w for _ in range(limit) for w in spout._sentence().split()))


def final_counts(coord: Any, component: str = "count") -> tuple[dict[str, int], int]:
    """The final count per word (the highest count `component`'s tasks emitted for it: each word
    goes to one task, which counts up by one per tuple) and how many counts were emitted."""
    final: dict[str, int] = {}
    emits = 0
    for rows in coord.captured.get(component, {}).get("default", {}).values():
        emits += len(rows)
        for word, n in rows:
            final[word] = max(final.get(word, 0), n)
    return final, emits


def run_wordcount(module: ModuleType, limit: int, parallelism: int = 2, timeout_secs: float = 90,
                  wave_tuples: int | None = None, extra_conf: dict | None = None,
                  **cluster_kwargs: Any) -> dict[str, Any]:
    """Runs the bounded word count until idle; the final count per word is the highest count a
    WordCount task emitted for it (each word goes to one task, which counts up by one per tuple).
    `wave_tuples`: at most this many sentences per wave (squall.wave.max.tuples); `extra_conf`:
    more topology settings (a cluster's shared checkpoint directory, ...)."""
    from squall import Config, LocalCluster

    conf = dict(module.CONF)
    if wave_tuples:
        conf[Config.SQUALL_WAVE_MAX_TUPLES] = wave_tuples
    conf.update(extra_conf or {})
    with LocalCluster(capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology(TOPOLOGY, conf, module.build_topology(parallelism, limit=limit))
        cluster.wait_idle(timeout_secs)
        coord = cluster.coordinator(TOPOLOGY)
        stats = cluster.get_topology_stats(TOPOLOGY)
        final, count_emits = final_counts(coord)
        split_emits = sum(len(r) for r in coord.captured.get("split", {}).get("default", {}).values())
        spout = stats["sentences"]
        return {
            "counts": dict(sorted(final.items())),
            "count_emits": count_emits,
            "split_emits": split_emits,
            "spout_emitted": spout["emitted"],
            "spout_acked": spout["acked"],
            "spout_failed": spout["failed"],
            "pending": coord.pending_count,
            "errors": [str(e) for e in coord.errors],
            "lost_waves": coord.lost_waves,
            "waves": coord.waves_done,
        }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("master", help="Spark master URL, e.g. spark://127.0.0.1:7077")
    p.add_argument("--limit", type=int, default=2000, help="sentences the spout emits")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--wave-tuples", type=int, default=None, help="at most this many sentences per wave")
    p.add_argument("--app-name", default="squall-cluster-test")
    p.add_argument("--timeout", type=float, default=90.0)
    args = p.parse_args(argv)

    from squall.engine.spark.session import get_or_create_session

    t0 = time.monotonic()
    spark = get_or_create_session(args.master, app_name=args.app_name,
                                  extra_conf={"spark.driver.host": "127.0.0.1",
                                              "spark.driver.bindAddress": "127.0.0.1"})
    sc = spark.sparkContext
    try:
        module = load_example()
        # One host, so any directory is shared by every "host" of this cluster.
        shared = tempfile.mkdtemp(prefix="squall-shared-")
        conf = {"squall.shared.paths": [shared], "squall.checkpoint.dir": os.path.join(shared, "checkpoints"),
                "squall.dead.letter.path": os.path.join(shared, "dead-letters.jsonl")}
        result = run_wordcount(module, args.limit, args.parallelism, args.timeout, args.wave_tuples,
                               extra_conf=conf, engine="spark", spark=spark)
        # Executors as the driver sees them (the driver's own entry included).
        infos = sc._jsc.sc().statusTracker().getExecutorInfos()
        result.update({
            "master": sc.master,
            "app_id": sc.applicationId,
            "executor_hosts": sorted(f"{i.host()}:{i.port()}" for i in infos),
            "secs": round(time.monotonic() - t0, 1),
        })
    finally:
        spark.stop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
