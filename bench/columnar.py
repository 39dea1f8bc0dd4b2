"""Columnar word count: bolt-rows/s with and without acking on Spark local[2], against the same
counting as a plain PySpark RDD job and as Bytewax with the same workers, counts checked.
Prints ONE JSON line on stdout; progress goes to stderr.

Runs examples/columnar_wordcount.py (a spout emitting Arrow columns with a msg id per sentence,
a split and a count ColumnarBolt) on a LocalCluster in real time, first with one acker
(at-least-once), then with none. bolt-rows/s is the sum over bolts of `executed` rows (a
sentence and each of its words count one each) over whole waves of the measured window, as
bench/wordcount.py measures bolt-tuples/s; its pieces (the squall run, Bytewax, plain PySpark,
the counts check) are reused from there.

Bytewax is not a project dependency: `pip install "bytewax==0.21.*"` into the .venv (the `bench`
extra); without it the Bytewax fields are null and the run says so.

Counts are checked for every system against a Counter over `str.split` of its corpus: squall's
by counting the spout's first `--check-sentences` sentences to completion (the same topology,
the spout limited), a word's count being the largest the count bolt emitted.

The acking cost (`acking_cost_ratio`: no-acker rate / acked rate) is the median over `--pairs`
pairs of runs made back to back: the first two cases, then more pairs of `--pair-seconds` each,
alternating which case goes first (`acking_cost_ratio_pairs`, `pair_rates`). On a shared machine
the speed drifts by more than the acking cost within a minute (one pair measured 0.97, the next
1.24 with the same code), so one pair alone says little; `acking_cost_ratio_first_pair` is that
pair. Bytewax and plain PySpark are compared with the median of the acked cases'
rates (`compared_squall_bolt_rows_per_sec`), as bench/wordcount.py does: the first case alone is
the one that varies most; `squall_over_plain_rdd_first_case` and `squall_over_bytewax_first_case`
are against it.

The same two squall cases also run on the local engine (in-process, no Spark: `local_engine_*`
fields), which separates what the columnar path costs from what the Spark engine adds.

    .venv/bin/python bench/columnar.py [--seconds 10] [--parallelism 2] [--spark local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for p in (str(ROOT), str(ROOT / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

import wordcount as wc  # noqa: E402  (bench/wordcount.py: the shared measuring pieces)

from squall import Config  # noqa: E402

EXAMPLE = ROOT / "examples" / "columnar_wordcount.py"
GOAL_BOLT_ROWS_PER_SEC = 3_000_000
GOAL_ACKING_COST_RATIO_MAX = 1.10
GOAL_OVER_BYTEWAX_MIN = 3.0
GOAL_OVER_PLAIN_RDD_MIN = 1.0
MAX_COMPARE_SENTENCES = 300_000


def load_example() -> ModuleType:
    """The example as `squall run` loads it, pickled by value for Spark's Python workers."""
    from pyspark import cloudpickle  # noqa: PLC0415

    from squall.cli import load_topology_module  # noqa: PLC0415

    module = load_topology_module(str(EXAMPLE))
    cloudpickle.register_pickle_by_value(module)
    return module


def corpus(example: ModuleType, n: int) -> list[str]:
    """The first n sentences of the spout's task 0 (msg ids 0..n-1), as its emits pick them."""
    return example.sentences_for(example.sentence_pool(42), np.arange(n)).to_pylist()


def squall_counts(example: ModuleType, spark: Any, parallelism: int, n: int) -> dict[str, int]:
    """The measured topology with its spout limited to n sentences, run to completion."""
    from squall.testing import complete_topology  # noqa: PLC0415

    conf = Config(example.CONF)
    conf[Config.TOPOLOGY_ACKER_EXECUTORS] = 1
    wc.say(f"bench: squall on spark: counting {n:,} sentences to completion to check the counts ...")
    result = complete_topology(example.build_topology(parallelism=parallelism, limit=n), conf=conf,
                               engine="spark", spark=spark)
    return wc.final_counts(result.emitted("count"))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="columnar word count bolt-rows/s; one JSON line on stdout")
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds per case (after the warm-up)")
    p.add_argument("--warmup", type=float, default=None,
                   help="warm-up seconds per case (default 5; 20 for the first, while the JVM's JIT compiles)")
    p.add_argument("--parallelism", type=int, default=2, help="tasks per bolt, and Bytewax's worker count")
    p.add_argument("--spark", metavar="MASTER", default="local[2]")
    p.add_argument("--check-sentences", type=int, default=50_000)
    p.add_argument("--pairs", type=int, default=5,
                   help="(acked, no ackers) pairs run back to back, alternating which goes first; the acking cost "
                        "ratio is the median of their ratios (default 5: the first two cases and 4 more pairs)")
    p.add_argument("--pair-seconds", type=float, default=8.0, help="measured seconds of each case of the extra pairs")
    p.add_argument("--bytewax-batch", type=int, default=1000)
    p.add_argument("--profile-spark", action="store_true",
                   help="where the acking case's wave time goes (driver steps, Spark job), per wave, in the JSON line")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    json_out = os.fdopen(os.dup(1), "w")  # the JSON line alone on stdout (the JVM writes to fd 1 too)
    os.dup2(2, 1)
    from squall.engine.spark.session import get_or_create_session  # noqa: PLC0415

    example = load_example()
    wc.say(f"bench: starting Spark ({args.spark}) ...")
    session = get_or_create_session(args.spark, app_name="squall-bench-columnar")
    warmup = 5.0 if args.warmup is None else args.warmup
    first_warmup = wc.first_case_warmup("spark", args.warmup, warmup)
    acking = wc.run_case(example, "spark", session, args.parallelism, 1, args.seconds, first_warmup, None, None,
                         profile_spark=args.profile_spark)
    if acking["profile_spark"]:
        wc.print_spark_profile(acking["profile_spark"])
    no_acking = wc.run_case(example, "spark", session, args.parallelism, 0, args.seconds, warmup, None, None)
    a, z = acking["bolt_tuples_per_sec"], no_acking["bolt_tuples_per_sec"]
    pairs = [(acking, no_acking), *wc.alternating_pairs(example, "spark", session, args)]
    ratio_fields = wc.pair_fields(pairs)
    # the same topology on the local engine (in-process, no Spark): what the columnar path itself costs
    local_a = wc.run_case(example, "local", None, args.parallelism, 1, args.seconds, 2.0, None, None)
    local_z = wc.run_case(example, "local", None, args.parallelism, 0, args.seconds, 2.0, None, None)

    nsent = min(max(acking["sentences"], 1000), MAX_COMPARE_SENTENCES)
    sentences = corpus(example, nsent)
    expected = wc.expected_counts(sentences)
    rows = nsent + sum(expected.values())
    wc.say(f"bench: {nsent:,} sentences ({rows:,} bolt-rows) per pass for Bytewax and plain PySpark")
    bw = wc.run_bytewax(sentences, rows, args.seconds, args.bytewax_batch, args.parallelism, expected)
    plain = wc.run_plain_pyspark(session, sentences, rows, args.seconds, expected)
    rdd = plain["rdd"]["bolt_tuples_per_sec"]
    bw_rate = bw["bolt_tuples_per_sec"] if bw else None
    a_med = ratio_fields["bolt_tuples_per_sec_acking_median"]  # what the other systems are compared with

    check = corpus(example, args.check_sentences)
    got = squall_counts(example, session, args.parallelism, args.check_sentences)
    counts_correct = wc.counts_verdict({
        "squall_columnar": wc.count_errors(wc.expected_counts(check), got),
        "bytewax": bw["count_errors"] if bw else None,
        "plain_pyspark_rdd": plain["rdd"]["count_errors"],
        "plain_pyspark_dataframe": plain["dataframe"]["count_errors"],
    })
    out = {
        "bench": "columnar_wordcount",
        "spark_master": args.spark,
        "parallelism": args.parallelism,
        "bolt_rows_per_sec_acking": round(a),
        "bolt_rows_per_sec_no_acking": round(z),
        "goal_bolt_rows_per_sec": GOAL_BOLT_ROWS_PER_SEC,
        **ratio_fields,
        "goal_acking_cost_ratio_max": GOAL_ACKING_COST_RATIO_MAX,
        "sentences_per_sec_acking": round(acking["sentences_per_sec"]),
        "sentences_per_wave_acking": round(acking["sentences_per_wave"]),
        "waves_per_sec_acking": wc._r(acking["waves_per_sec"], 2),
        "waves_per_sec_no_acking": wc._r(no_acking["waves_per_sec"], 2),
        "cpu_cores_acking": acking["cpu_cores"],
        "cpu_cores_no_acking": no_acking["cpu_cores"],
        "complete_latency_p50_ms": wc._r(acking["p50"]),
        "complete_latency_p99_ms": wc._r(acking["p99"]),
        "failed_trees": acking["failed"],
        "errors": acking["errors"] + no_acking["errors"],
        "local_engine_bolt_rows_per_sec_acking": round(local_a["bolt_tuples_per_sec"]),
        "local_engine_bolt_rows_per_sec_no_acking": round(local_z["bolt_tuples_per_sec"]),
        "local_engine_acking_cost_ratio": wc._ratio(local_z["bolt_tuples_per_sec"], local_a["bolt_tuples_per_sec"]),
        "plain_pyspark_rdd_bolt_rows_per_sec": round(rdd),
        "plain_pyspark_dataframe_bolt_rows_per_sec": round(plain["dataframe"]["bolt_tuples_per_sec"]),
        "compared_squall_bolt_rows_per_sec": a_med,
        "squall_over_plain_rdd": wc._ratio(a_med, rdd),
        "squall_over_plain_rdd_first_case": wc._ratio(a, rdd),
        "goal_squall_over_plain_rdd_min": GOAL_OVER_PLAIN_RDD_MIN,
        "bytewax_bolt_rows_per_sec": round(bw_rate) if bw_rate else None,
        "bytewax_note": None if bw else 'bytewax not installed (pip install "bytewax==0.21.*"): skipped',
        "bytewax_workers": args.parallelism if bw else None,
        "squall_over_bytewax": wc._ratio(a_med, bw_rate),
        "squall_over_bytewax_first_case": wc._ratio(a, bw_rate),
        "goal_squall_over_bytewax_min": GOAL_OVER_BYTEWAX_MIN,
        "compare_sentences_per_pass": nsent,
        "counts_correct": counts_correct,
        "counts_check_sentences_squall": args.check_sentences,
        "measured_secs": args.seconds,
        "warmup_secs": warmup,
        "first_case_warmup_secs": first_warmup,
        "profile_spark_acking": acking["profile_spark"],
    }
    session.stop()
    json_out.write(json.dumps(out) + "\n")
    json_out.flush()
    return wc.exit_status(counts_correct)


if __name__ == "__main__":
    sys.exit(main())
