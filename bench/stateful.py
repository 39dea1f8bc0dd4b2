"""Stateful counting bolt vs the same bolt without state. Prints ONE JSON line on stdout;
progress goes to stderr.

examples/stateful_wordcount.py's topology (sentences -> split -> count by word) runs in real time
twice per engine (local, and Spark `local[2]` unless `--spark MASTER`): once with the stateful
count bolt (a KeyValueState in SQLite, a checkpoint every `--interval-ms`, default 1,000; acks held
until the commit) and once with a plain Bolt doing the same counting in a dict and acking at
once. words/s = the count bolt's `executed` between two samples `--seconds` apart (after
`--warmup`), divided by the time between them. The two kinds run `--repeat` times each
(default 2), interleaved, and the best of each is compared (all are listed): the machine's
other load and Spark's slow first minute would otherwise favour whichever runs later.
ratio = stateful / plain; goal >= 0.80.

A stateful bolt's inputs are acked only after the next checkpoint, so a sentence stays pending
up to one checkpoint interval; when those held trees fill a quarter of max spout pending, the
coordinator checkpoints early rather than stall the spout (squall.engine.driver.checkpoints). Both runs
use `--max-pending` (default 100,000).
Breakdown for the stateful run: checkpoints committed, time spent in the provider's prepare and
commit (summed over tasks, from the local engine where they run in this process), and the cost
of a put, measured alone.

    .venv/bin/python bench/stateful.py [--seconds 10] [--warmup 4] [--engines local,spark]
                                       [--interval-ms 1000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from squall import Config, LocalCluster, TopologyBuilder  # noqa: E402
from squall.state.providers import SqliteProvider  # noqa: E402


def say(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)


def load_example(name: str = "stateful_wordcount") -> Any:
    """An example file of examples/ loaded as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def topology(example: Any, stateful: bool) -> Any:
    b = TopologyBuilder()
    b.set_spout("sentences", example.SentenceSpout(), parallelism=1)
    b.set_bolt("split", example.SplitSentence(), parallelism=2).shuffle_grouping("sentences")
    # without state: examples/wordcount.py's WordCount, counting in a dict and acking at once
    bolt = example.StatefulWordCount() if stateful else load_example("wordcount").WordCount()
    b.set_bolt("count", bolt, parallelism=2).fields_grouping("split", ["word"])
    return b.create_topology()


class ProviderTimer:
    """Time spent in SqliteProvider.prepare/commit in this process (the local engine's tasks)."""

    def __init__(self) -> None:
        self.secs = 0.0
        self.calls = 0
        self._orig = (SqliteProvider.prepare, SqliteProvider.commit)
        for name, fn in zip(("prepare", "commit"), self._orig):
            setattr(SqliteProvider, name, self._timed(fn))

    def _timed(self, fn: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.secs += time.perf_counter() - t0
                self.calls += 1
        return run

    def restore(self) -> None:
        SqliteProvider.prepare, SqliteProvider.commit = self._orig


def run(example: Any, engine: str, spark: Any, stateful: bool, args: Any, db: str) -> dict[str, Any]:
    conf = Config(example.CONF)
    conf[Config.TOPOLOGY_MAX_SPOUT_PENDING] = args.max_pending
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = args.interval_ms
    conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"path": db}
    kind = "stateful" if stateful else "plain"
    say(f"bench: {kind} count on {engine}: {args.warmup:.0f}s warm-up + {args.seconds:.0f}s ...")
    timer = ProviderTimer() if stateful else None
    name = f"bench-{kind}-{engine}-{os.getpid()}"
    with LocalCluster(engine=engine, spark=spark) as cluster:
        cluster.submit_topology(name, conf, topology(example, stateful))
        time.sleep(args.warmup)
        s0, t0, p0 = cluster.get_topology_stats(name), time.perf_counter(), timer.secs if timer else 0.0
        time.sleep(args.seconds)
        s1, t1, p1 = cluster.get_topology_stats(name), time.perf_counter(), timer.secs if timer else 0.0
        coord = cluster.coordinator(name)
        checkpoints, early = coord.checkpoints.txid, coord.checkpoints.early
        errors = coord.error_count
        cluster.kill_topology(name)
    if timer:
        timer.restore()
    dt = t1 - t0
    out = {
        "words_per_sec": round((s1["count"]["executed"] - s0["count"]["executed"]) / dt),
        "sentences_acked_per_sec": round((s1["sentences"]["acked"] - s0["sentences"]["acked"]) / dt),
        "failed": s1["sentences"]["failed"],
        "errors": errors,
    }
    if stateful:
        out["checkpoints"] = checkpoints
        out["early_checkpoints"] = early  # brought forward: held trees filled max pending
        if engine == "local":
            out["provider_secs_share"] = round((p1 - p0) / dt, 4)
    say(f"bench:   {out}")
    return out


def put_cost_us(n: int = 200_000) -> float:
    """One KeyValueState.put of an int under a short string key (serialization included)."""
    from squall.state.kv import KeyValueState  # noqa: PLC0415
    from squall.state.providers import MemoryProvider  # noqa: PLC0415

    s = KeyValueState(MemoryProvider(), "bench/put/0")
    s.init()
    keys = [f"w{i % 50}" for i in range(n)]
    t0 = time.perf_counter()
    for i, k in enumerate(keys):
        s.put(k, i)
    return round(1e6 * (time.perf_counter() - t0) / n, 3)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=float, default=4)
    p.add_argument("--engines", default="local,spark")
    p.add_argument("--spark", default="local[2]")
    p.add_argument("--interval-ms", type=int, default=1000)
    p.add_argument("--max-pending", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=2, help="runs of each kind, interleaved; the best of each is compared")
    args = p.parse_args(argv)
    json_out = os.fdopen(os.dup(1), "w")  # the JSON line alone on stdout (the JVM's output goes to stderr)
    os.dup2(2, 1)
    example = load_example()
    result: dict[str, Any] = {"bench": "stateful", "checkpoint_interval_ms": args.interval_ms,
                              "max_spout_pending": args.max_pending, "goal_ratio": 0.80}
    with tempfile.TemporaryDirectory() as tmp:
        for engine in args.engines.split(","):
            spark = None
            if engine == "spark":
                from squall.engine.spark.session import get_or_create_session  # noqa: PLC0415

                spark = get_or_create_session(args.spark, app_name="squall-bench-stateful")
            runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
            for _ in range(args.repeat):  # interleaved: a slow start or a busy moment does not favour one
                for stateful in (False, True):
                    runs[stateful].append(run(example, engine, spark, stateful, args, str(Path(tmp) / "s.sqlite")))
            plain, state = (max(runs[k], key=lambda r: r["words_per_sec"]) for k in (False, True))
            ratio = round(state["words_per_sec"] / plain["words_per_sec"], 3) if plain["words_per_sec"] else None
            result[engine] = {"plain": plain, "stateful": state, "ratio": ratio,
                              "all_words_per_sec": {"plain": [r["words_per_sec"] for r in runs[False]],
                                                    "stateful": [r["words_per_sec"] for r in runs[True]]}}
    result["put_us"] = put_cost_us()
    print(json.dumps(result), file=json_out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
