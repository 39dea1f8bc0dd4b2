"""Word-count throughput, with and without acking. Prints one JSON line.

Runs examples/wordcount.py's topology (unbounded spout) on a LocalCluster in real time, first
with one acker, then with none (topology.acker.executors = 0). After a warm-up, bolt-tuples/s
is the sum over bolts of the `executed` delta across the measured window divided by its length
(a sentence and each of its words count as one bolt-tuple each).

    .venv/bin/python bench/wordcount.py [--engine local|spark] [--seconds 10] [--parallelism 2] [--profile]

`--profile` runs the acking case under cProfile (in the thread that drives the waves) and prints
the top 25 functions by tottime to stderr; the JSON line stays alone on stdout.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import json
import pstats
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from squall import Config, LocalCluster

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "wordcount.py"
GOAL_BOLT_TUPLES_PER_SEC = 500_000
GOAL_ACKING_COST_RATIO_MAX = 1.10
WARMUP_SECS = 2.0
PROFILE_TOP = 25


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("squall_example_wordcount", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def bolt_executed(stats: dict[str, dict[str, Any]]) -> int:
    return sum(int(s.get("executed") or 0) for s in stats.values() if s.get("kind") == "bolt")


class ThreadProfiler:
    """cProfile for the threads started while active (the cluster's wave thread): cProfile
    only profiles the thread that enables it, so each new thread enables it on its first event."""

    def __init__(self) -> None:
        self.profile = cProfile.Profile()
        self._armed = False

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        sys.setprofile(None)
        if not self._armed:
            self._armed = True
            self.profile.enable()

    def __enter__(self) -> ThreadProfiler:
        threading.setprofile(self._hook)
        return self

    def __exit__(self, *exc: Any) -> None:
        threading.setprofile(None)  # type: ignore[arg-type]

    def report(self, top: int) -> str:
        buf = io.StringIO()
        st = pstats.Stats(self.profile, stream=buf)
        st.sort_stats("tottime").print_stats(top)
        return buf.getvalue()


def run_case(example: ModuleType, engine: str, spark: str | None, parallelism: int, ackers: int,
             seconds: float, warmup: float, profiler: ThreadProfiler | None = None) -> dict[str, Any]:
    conf = Config(example.CONF)
    conf[Config.TOPOLOGY_ACKER_EXECUTORS] = ackers
    topology = example.build_topology(parallelism=parallelism)  # limit None: the spout never stops
    name = f"wordcount-bench-{ackers}"
    with LocalCluster(engine=engine, spark=spark) as cluster:
        if profiler is not None:
            with profiler:
                cluster.submit_topology(name, conf, topology)
        else:
            cluster.submit_topology(name, conf, topology)
        time.sleep(warmup)
        # get_topology_stats waits for the end of the running wave: take each time after it.
        s0 = cluster.get_topology_stats(name)
        t0 = time.perf_counter()
        w0 = cluster.coordinator(name).waves_done
        time.sleep(seconds)
        s1 = cluster.get_topology_stats(name)
        t1 = time.perf_counter()
        w1 = cluster.coordinator(name).waves_done
        errors = cluster.coordinator(name).error_count
        cluster.kill_topology(name)
    if profiler is not None:
        profiler.profile.disable()
    dt = t1 - t0
    spout = s1["sentences"]
    return {
        "bolt_tuples_per_sec": (bolt_executed(s1) - bolt_executed(s0)) / dt,
        "sentences_per_sec": (spout["emitted"] - s0["sentences"]["emitted"]) / dt,
        "acked_per_sec": (spout["acked"] - s0["sentences"]["acked"]) / dt,
        "failed": spout["failed"],
        "waves_per_sec": (w1 - w0) / dt,
        "p50": spout.get("complete_latency_p50_ms"),
        "p99": spout.get("complete_latency_p99_ms"),
        "errors": errors,
        "secs": dt,
    }


def _r(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(x, nd)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="word-count bolt-tuples/s with and without acking")
    p.add_argument("--engine", choices=("local", "spark"), default="local")
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds per case (after a 2 s warm-up)")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--spark", metavar="MASTER", default=None, help="Spark master for --engine spark")
    p.add_argument("--warmup", type=float, default=WARMUP_SECS, help=argparse.SUPPRESS)
    p.add_argument("--profile", action="store_true", help="profile the acking case; top 25 by tottime to stderr")
    args = p.parse_args(argv)

    example = load_example()
    spark = args.spark if args.engine == "spark" else None
    profiler = ThreadProfiler() if args.profile else None
    acking = run_case(example, args.engine, spark, args.parallelism, 1, args.seconds, args.warmup, profiler)
    if profiler is not None:
        print(f"--- cProfile of the acking case (wave thread), top {PROFILE_TOP} by tottime ---", file=sys.stderr)
        print(profiler.report(PROFILE_TOP), file=sys.stderr)
    no_acking = run_case(example, args.engine, spark, args.parallelism, 0, args.seconds, args.warmup)

    a, n = acking["bolt_tuples_per_sec"], no_acking["bolt_tuples_per_sec"]
    out = {
        "engine": args.engine,
        "bolt_tuples_per_sec_acking": round(a),
        "bolt_tuples_per_sec_no_acking": round(n),
        "acking_cost_ratio": round(n / a, 3) if a else None,
        "complete_latency_p50_ms": _r(acking["p50"]),
        "complete_latency_p99_ms": _r(acking["p99"]),
        "goal_bolt_tuples_per_sec": GOAL_BOLT_TUPLES_PER_SEC,
        "goal_acking_cost_ratio_max": GOAL_ACKING_COST_RATIO_MAX,
        "sentences_per_sec_acking": round(acking["sentences_per_sec"]),
        "sentences_per_sec_no_acking": round(no_acking["sentences_per_sec"]),
        "waves_per_sec_acking": _r(acking["waves_per_sec"]),
        "waves_per_sec_no_acking": _r(no_acking["waves_per_sec"]),
        "failed_trees": acking["failed"],
        "errors": acking["errors"] + no_acking["errors"],
        "parallelism": args.parallelism,
        "measured_secs": args.seconds,
        "profiled": bool(args.profile),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
