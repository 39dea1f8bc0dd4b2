"""Windowed bolt throughput and memory. Prints ONE JSON line on stdout; progress goes to stderr.

Throughput: examples/windowed_wordcount.py's topology (sentences -> split -> a sliding count
window of 10,000 words every 1,000 -> report), run in real time on the local engine and on Spark
(`local[2]` unless `--spark MASTER`). tuples/s = words executed by the windowed bolt over whole
waves (from the first wave that ends after the warm-up to the first that ends `--seconds` later),
divided by the time between those two wave ends; every window's emit is anchored to its 10,000
words, and every word is acked when it leaves the windows. The Spark warm-up is longer: the JVM's
JIT compilers took ~0.5 of this machine's 2 cores for the first ~20 s of a session.

Memory per windowed tuple beyond its values: a HeldStore (what the windowed bolt keeps) given
`--rows` (default 1,000,000) tracked rows whose values exist already; tracemalloc counts what the
store allocates (columns and the list's slots), divided by the rows. For comparison, the same for
tuples held as Tuple objects (the plain bolt's way: each keeps a one-row batch), over 10,000 rows.
Also: the time of one emit anchored to 10,000 held rows (vectorized edges and XORs).

    .venv/bin/python bench/windowing.py [--seconds 10] [--warmup 5|20] [--rows 1000000] [--engines local,spark]
                                        [--max-pending 40000]

A sentence is acked only when its words have slid out of the window (about 1,200 sentences
later), so nearly every sentence of a wave stays pending until that wave ends. The default max
spout pending here, 40,000 sentences (not the example's 5,000), is two of Spark's default waves
(squall.wave.max.tuples 20,000): with 20,000 the spout found max pending full while a wave ran,
so Spark's waves ran one after another (~640 ms each here, ~250K words/s) where two overlap
(~540 ms, ~300K words/s); the local engine's waves are small and it does not matter there.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))

import wordcount as wc  # noqa: E402  (bench/wordcount.py: WaveLog, rates over whole waves)


def say(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("windowed_wordcount", ROOT / "examples" / "windowed_wordcount.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _window_stats(coord: Any) -> dict[str, int]:
    st = coord.stats
    return {"executed": st["top"].executed, "emitted": st["top"].emitted,
            "acked": st["sentences"].acked, "failed": st["sentences"].failed}


def throughput(example: Any, engine: str, spark: Any, seconds: float, warmup: float,
               max_pending: int) -> dict[str, Any]:
    """Rates over whole waves (wordcount.WaveLog): a Spark wave carries ~160,000 words here, so
    a rate over a fixed span of seconds moved by up to a wave (16,000 words/s over 10 s)."""
    from squall import Config, LocalCluster  # noqa: PLC0415

    conf = Config(example.CONF)
    conf[Config.TOPOLOGY_MAX_SPOUT_PENDING] = max_pending
    say(f"bench: windowed word count on {engine}: {warmup:.0f}s warm-up + {seconds:.0f}s ...")
    with LocalCluster(engine=engine, spark=spark) as cluster:
        cluster.submit_topology("windows", conf, example.build_topology())
        coord = cluster.coordinator("windows")
        waves = wc.WaveLog(coord, extra=lambda: _window_stats(coord))
        time.sleep(warmup)
        t0 = time.perf_counter()
        time.sleep(seconds)
        waves.wait_for_span(t0, seconds, seconds + 60)
        errors = coord.error_count
        cluster.kill_topology("windows")
    got = waves.window(t0, float("inf"))
    if got is None:
        raise SystemExit(f"bench: fewer than 2 waves of {engine} ended in {seconds:.0f}s + 60 s")
    first, last = got
    a, b = first[7], last[7]
    dt = last[0] - first[0]
    nwaves = last[2] - first[2]
    out = {
        "tuples_per_sec": round((b["executed"] - a["executed"]) / dt),
        "windows_per_sec": round((b["emitted"] - a["emitted"]) / dt, 1),
        "sentences_acked_per_sec": round((b["acked"] - a["acked"]) / dt),
        "waves": nwaves,
        "wave_ms": round(1000 * dt / nwaves, 1),
        "failed": b["failed"],
        "errors": errors,
    }
    say(f"bench:   {out}")
    return out


def tracked_batch(n: int, seed: int = 7) -> Any:
    from squall.reliability.batch import TupleBatch  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    values = [[f"w{i % 50}"] for i in range(n)]
    off = np.arange(n + 1, dtype=np.int64)
    roots = rng.integers(1, 1 << 63, n, dtype=np.uint64)
    vals = rng.integers(1, 1 << 63, n, dtype=np.uint64)
    return TupleBatch("split", "default", ("word",), 1, values, off, roots, vals)


def store_bytes_per_row(n: int) -> dict[str, Any]:
    from squall.reliability.held import HeldStore  # noqa: PLC0415
    from squall.reliability.tuple import tuples_of  # noqa: PLC0415

    batch = tracked_batch(n)
    tuples = tuples_of(batch)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    store = HeldStore()
    for i, t in enumerate(tuples):
        store.add(t, i + 1, 0)
    store.consolidate()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return {"rows": n, "traced_bytes_per_row": round(used / n, 1), "column_bytes_per_row": round(store.nbytes() / n, 1)}


def held_tuple_bytes_per_row(n: int = 10_000) -> float:
    """The plain bolt's way (bolt_trees.hold_pending): each held Tuple keeps a one-row batch."""
    from squall.reliability.bolt_trees import hold_pending  # noqa: PLC0415
    from squall.reliability.tuple import tuples_of  # noqa: PLC0415

    batch = tracked_batch(n)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tuples = tuples_of(batch)
    hold_pending(tuples, batch, np.zeros(n, np.uint64))
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return round(used / n, 1)


def anchor_ms(n: int = 10_000, repeat: int = 20) -> float:
    """Median time of one emit (one child) anchored to n held rows."""
    from squall.reliability.bolt_trees import store_anchor_edges  # noqa: PLC0415
    from squall.reliability.held import HeldRows, HeldStore  # noqa: PLC0415
    from squall.reliability.tuple import tuples_of  # noqa: PLC0415

    store = HeldStore()
    for i, t in enumerate(tuples_of(tracked_batch(n))):
        store.add(t, i + 1, 0)
    store.consolidate()
    rows = HeldRows(store, np.arange(n))
    times = []
    for k in range(repeat):
        t0 = time.perf_counter()
        store_anchor_edges(rows, np.array([0]), np.array([5]), 12345, k).merged(1)
        times.append(time.perf_counter() - t0)
    return round(1000 * float(np.median(times)), 3)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds before measuring (default: 5 local; 20 spark, while the JVM's JIT compiles)")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--engines", default="local,spark")
    p.add_argument("--spark", default="local[2]")
    p.add_argument("--max-pending", type=int, default=40000,
                   help="sentences per spout task in flight: a word is acked only when it slides out of the window")
    args = p.parse_args(argv)
    json_out = os.fdopen(os.dup(1), "w")  # the JSON line alone on stdout (the JVM's output goes to stderr)
    os.dup2(2, 1)
    example = load_example()
    result: dict[str, Any] = {"bench": "windowing", "window": example.WINDOW, "interval": example.INTERVAL}
    for engine in args.engines.split(","):
        spark = None
        if engine == "spark":
            from squall.engine.spark.session import get_or_create_session  # noqa: PLC0415

            spark = get_or_create_session(args.spark, app_name="squall-bench-windowing")
        warmup = args.warmup if args.warmup is not None else (20 if engine == "spark" else 5)
        result[engine] = throughput(example, engine, spark, args.seconds, warmup, args.max_pending)
        result[engine]["warmup_secs"] = warmup
        result[engine]["max_spout_pending"] = args.max_pending
    result["memory"] = store_bytes_per_row(args.rows)
    result["memory"]["held_tuple_bytes_per_row"] = held_tuple_bytes_per_row()
    result["memory"]["goal_bytes_per_row"] = 64
    result["anchor_10k_rows_ms"] = anchor_ms()
    print(json.dumps(result), file=json_out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
