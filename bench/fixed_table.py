"""A bolt that holds a lookup table: carried every wave, or declared in `fixed_attributes`. Prints
ONE JSON line on stdout; progress goes to stderr.

examples/wordcount.py's topology (sentences -> split -> count by word, parallelism 2, max spout
pending `--max-pending`, default 50,000) on Spark `local[2]` (`--spark MASTER`), with a split bolt
that builds a table of `--table` entries (default 1,000,000; ~15 MB pickled) in `prepare` and looks
each word up in it. Three cases: no table; the table as a plain attribute (the Spark engine pickles
the instance after every wave and unpickles it on most); the table in `fixed_attributes` (pickled
once, unpickled once per Python worker: engine/tasks/fixed_parts.py). acked sentences/s = the spout's
acked count between two samples `--seconds` apart (after `--warmup`). The cases run `--repeat`
times (default 2), interleaved, and each case's median is reported (all are listed).

    .venv/bin/python bench/fixed_table.py [--table 1000000] [--seconds 15] [--warmup 8] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from squall import Config, LocalCluster, TopologyBuilder  # noqa: E402
from squall.engine.spark.session import get_or_create_session  # noqa: E402

CASES = ("no_table", "plain_table", "fixed_table")


def say(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)


def load_example() -> Any:
    """examples/wordcount.py as `squall run` loads it (Spark's Python workers cannot import it by
    name, so its code is pickled by value), as bench/wordcount.py does."""
    from pyspark import cloudpickle  # noqa: PLC0415

    from squall.cli import load_topology_module  # noqa: PLC0415

    module = load_topology_module(str(ROOT / "examples" / "wordcount.py"))
    cloudpickle.register_pickle_by_value(module)
    return module


wordcount = load_example()


class LookupSplit(wordcount.SplitSentence):
    """Splits a sentence and looks each word up in a table built in prepare."""

    def __init__(self, entries: int):
        self.entries = entries

    def prepare(self, conf: dict, context: Any) -> None:
        self.table = {f"w{i}": i for i in range(self.entries)}
        self.found = 0

    def execute(self, tuple: Any, collector: Any) -> None:  # noqa: A002 - Storm's parameter name
        table = self.table
        for word in tuple.values[0].split():
            if word in table:
                self.found += 1
            collector.emit([word])


class FixedLookupSplit(LookupSplit):
    fixed_attributes = ("table",)


def topology(case: str, entries: int) -> Any:
    split = {"no_table": LookupSplit(0), "plain_table": LookupSplit(entries),
             "fixed_table": FixedLookupSplit(entries)}[case]
    b = TopologyBuilder()
    b.set_spout("sentences", wordcount.RandomSentenceSpout(), parallelism=1)
    b.set_bolt("split", split, parallelism=2).shuffle_grouping("sentences")
    b.set_bolt("count", wordcount.WordCount(), parallelism=2).fields_grouping("split", ["word"])
    return b.create_topology()


def run_case(spark: Any, case: str, entries: int, max_pending: int, warmup: float, seconds: float,
             check_waves: int | None) -> float:
    conf = Config(wordcount.CONF)
    conf[Config.TOPOLOGY_MAX_SPOUT_PENDING] = max_pending
    if check_waves is not None:
        conf[Config.SQUALL_FIXED_CHECK_WAVES] = check_waves
    with LocalCluster(engine="spark", spark=spark) as cluster:
        cluster.submit_topology(case, conf, topology(case, entries))
        time.sleep(warmup)
        a0, t0 = cluster.get_topology_stats(case)["sentences"]["acked"], time.perf_counter()
        time.sleep(seconds)
        a1, t1 = cluster.get_topology_stats(case)["sentences"]["acked"], time.perf_counter()
        cluster.kill_topology(case)
    rate = (a1 - a0) / (t1 - t0)
    say(f"bench: {case}: {rate:,.0f} acked sentences/s")
    return rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", type=int, default=1_000_000, help="entries in the split bolt's table")
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--warmup", type=float, default=8.0)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--max-pending", type=int, default=50_000)
    p.add_argument("--spark", default="local[2]", help="Spark master")
    p.add_argument("--check-waves", type=int, default=None,
                   help="squall.fixed.check.waves (default: the engine's, 25; 0: no checks)")
    args = p.parse_args()
    spark = get_or_create_session(args.spark)
    rates: dict[str, list[float]] = {c: [] for c in CASES}
    for r in range(args.repeat):
        for case in CASES if r % 2 == 0 else reversed(CASES):
            rates[case].append(run_case(spark, case, args.table, args.max_pending, args.warmup, args.seconds,
                                        args.check_waves))
    med = {c: statistics.median(v) for c, v in rates.items()}
    print(json.dumps({
        "spark_master": args.spark, "table_entries": args.table, "max_spout_pending": args.max_pending,
        **{f"acked_sentences_per_sec_{c}": round(med[c]) for c in CASES},
        "runs": {c: [round(x) for x in v] for c, v in rates.items()},
        "fixed_over_plain": round(med["fixed_table"] / med["plain_table"], 3),
        "fixed_over_no_table": round(med["fixed_table"] / med["no_table"], 3),
        "plain_over_no_table": round(med["plain_table"] / med["no_table"], 3),
        "fixed_check_waves": Config.DEFAULTS[Config.SQUALL_FIXED_CHECK_WAVES] if args.check_waves is None
        else args.check_waves,
        "measured_secs": args.seconds, "warmup_secs": args.warmup, "repeat": args.repeat,
    }))


if __name__ == "__main__":
    main()
