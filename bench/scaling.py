"""How the word count scales with worker hosts: 1, 2 and 3 hosts of a Spark standalone cluster in
network namespaces, each host capped at `--cap` cores (0.4 by default) by the cgroup v1 cpu
controller. Prints ONE JSON line.

A namespace isolates a host's network but not its cores: uncapped, 3 workers on a 2-core machine
compete for the same cores and adding one shows nothing. Capped at 0.4 cores, three hosts (1.2
cores) fit on the machine next to the master and the driver, so a host added is capacity added,
as on a real cluster (tests/support/netns_cluster.py, tests/support/cpu_caps.py).

Each run is a fresh cluster of N workers (`--cores 1` each) and one application
(tests/support/netns_job.py `wordcount-scaling`): spout, split and count at N tasks each (one of
each per worker core), one acker, `--sentences` in all (`sentences / N` per spout task, so every
run does the same work), waves sized by the engine unless `--wave-tuples` caps them, timed from
submit to idle. The default 480,000 sentences keep one capped host busy for ~40 s (a shorter run
is mostly its submit and first waves); starting a capped cluster and an application costs another
~40-70 s per run, not counted. Per run:

- `sentences_per_s`, `bolt_tuples_per_s` (split + count executes + sentences, as bench/cluster.py)
  and whether every word's final count is exact (`counts_correct`);
- `driver_cpu`: cores the driver used over the run, its Python process and its JVM;
- `worker_hosts`: per host, cores its group used (cpuacct) and how often the cap held it back
  (`throttled_fraction`: CFS periods in which it ran out of quota).

Then `scaling_2_over_1` and `scaling_3_over_1` (bolt-tuples/s against 1 host), and the goal:
`scaling_3_over_1 >= 2.5`. Progress goes to stderr. Exit status 1 if any count is wrong or a run
failed.

    sudo .venv/bin/python bench/scaling.py [--cap 0.4] [--sentences 120000] [--workers 1,2,3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import cpu_caps  # noqa: E402
from tests.support.netns_cluster import NetnsCluster, unavailable_reason  # noqa: E402
from tests.support.netns_job import expected_scaling_counts  # noqa: E402
from tests.support.netns_runs import JobError, run_job  # noqa: E402
from tests.support.spark_cluster_job import load_example  # noqa: E402
from tests.support.worker_venv import worker_python  # noqa: E402

GOAL_3_OVER_1 = 2.5


def log(msg: str) -> None:
    print(f"[scaling] {msg}", file=sys.stderr, flush=True)


def run(n: int, args: argparse.Namespace, python: str, tmp: Path) -> dict[str, Any]:
    """One fresh capped cluster of `n` hosts and one word count on it; the run's figures."""
    limit = args.sentences // n
    started = time.monotonic()
    with NetnsCluster(tmp / f"w{n}", workers=n, cores=args.cores, worker_python=python,
                      cpu_cap=args.cap) as cluster:
        log(f"{n} worker(s) up in {time.monotonic() - started:.1f}s; {n * limit} sentences")
        opts = ["--parallelism", str(n), "--limit", str(limit), "--wave-tuples", str(args.wave_tuples),
                "--slots", str(n * args.cores),
                "--timeout", str(args.timeout),
                "--cpu-groups", ",".join(w.cap.name for w in cluster.workers if w.cap is not None)]
        r = run_job(cluster, "wordcount-scaling", *opts, timeout=args.timeout + 120)
        hosts = {w.cap.name: w.ip for w in cluster.workers if w.cap is not None}
    correct = r["counts"] == expected_scaling_counts(load_example(), n, limit)
    out = {"workers": n, "sentences": r["sentences"], "run_secs": r["run_secs"],
           "sentences_per_s": r["sentences_per_s"], "bolt_tuples_per_s": r["bolt_tuples_per_s"],
           "counts_correct": correct, "waves": r["waves"], "lost_waves": r["lost_waves"],
           "spout_failed": r["spout_failed"], "errors": len(r["errors"]),
           "driver_cpu": {k: v["cores"] for k, v in r["driver_cpu"].items()},
           "worker_hosts": [{"host": hosts[name], **{k: u[k] for k in ("cores", "cpu_secs", "throttled_fraction",
                                                                       "throttled_secs")}}
                            for name, u in r["worker_cpu"].items()],
           "executors": len(r["executors"]) - 1}  # the driver's own entry is one of them
    log(f"{n} worker(s): {json.dumps(out)}")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cap", type=float, default=0.4, help="cores each worker host may use")
    p.add_argument("--cores", type=int, default=1, help="cores each Spark worker offers")
    p.add_argument("--sentences", type=int, default=480_000,
                   help="sentences in all per run (split evenly over the spout tasks; a multiple of 6 divides evenly)")
    p.add_argument("--workers", default="1,2,3", help="the cluster sizes to run, in order")
    p.add_argument("--wave-tuples", type=int, default=0,
                   help="at most this many sentences per wave (0: the engine's own)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds a run may take to go idle")
    p.add_argument("--logs", default="", help="keep the clusters' and jobs' logs in this directory (default: removed)")
    args = p.parse_args()
    reason = unavailable_reason() or cpu_caps.unavailable_reason()
    if reason:
        print(json.dumps({"error": reason}))
        return 1
    sizes = [int(x) for x in args.workers.split(",")]
    out: dict[str, Any] = {"bench": "scaling", "cap_cores": args.cap, "worker_cores": args.cores,
                           "sentences": args.sentences, "wave_tuples": args.wave_tuples, "runs": []}
    t0 = time.monotonic()
    python = worker_python()
    ok = True
    with tempfile.TemporaryDirectory(prefix="squall-bench-scaling-") as tmp:
        logs = Path(args.logs or tmp)
        for n in sizes:
            try:
                result = run(n, args, python, logs)
            except (JobError, RuntimeError) as e:
                log(f"{n} worker(s) failed: {e}")
                result = {"workers": n, "error": str(e)[-2000:], "counts_correct": False}
            ok &= result["counts_correct"]
            out["runs"].append(result)
    rate = {r["workers"]: r.get("bolt_tuples_per_s") for r in out["runs"]}
    for n in (2, 3):
        out[f"scaling_{n}_over_1"] = round(rate[n] / rate[1], 3) if rate.get(n) and rate.get(1) else None
    out["goal"] = f"scaling_3_over_1 >= {GOAL_3_OVER_1}"
    out["goal_met"] = out["scaling_3_over_1"] is not None and out["scaling_3_over_1"] >= GOAL_3_OVER_1
    out["counts_ok"] = bool(ok)
    out["secs"] = round(time.monotonic() - t0, 1)
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
