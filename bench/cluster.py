"""The word count on a 3-worker Spark standalone cluster in network namespaces, next to local[2]
on the same machine, and the stall when a worker host is SIGKILLed. Prints ONE JSON line.

Needs root and iproute2 (tests/support/netns_cluster.py). Each figure is one application: the
driver in a subprocess (tests/support/netns_job.py), squall shipped as a zip, the cluster's
executors running a clean venv.

- `cluster_3w` / `local_2`: sentences/s and bolt-tuples/s (split + count executes) of the bounded
  word count (`--limit` sentences, waves of `--wave-tuples`), timed from submit to idle. The same
  2-core machine runs the master, 3 workers, 3 executor JVMs and the driver, so the ratio shows
  the overhead of real network shuffles and remote executors, not a speed-up.
- `worker_loss`: the kill after 4 completed waves (work done, not time), then `stall_secs` (the
  longest the stream stood still from the kill on: kill to a completed wave, or between two),
  replays and lost waves, Spark tasks re-run, and the tasks the host that joined afterwards ran;
  `stall_goal_secs` = 5 s: seconds, not a message timeout.
Exit status 1 if any run's counts are wrong.

    sudo .venv/bin/python bench/cluster.py [--limit 4000] [--wave-tuples 400]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.netns_cluster import NetnsCluster, unavailable_reason  # noqa: E402
from tests.support.netns_runs import run_job, worker_loss  # noqa: E402
from tests.support.spark_cluster_job import expected_counts, load_example  # noqa: E402
from tests.support.worker_venv import worker_python  # noqa: E402

MESSAGE_TIMEOUT = 30
STALL_GOAL_SECS = 5.0  # a worker lost costs seconds, not a message timeout


class LocalMaster:
    """What netns_runs.run_job needs of a cluster, for the local[2] run on the same machine."""

    def __init__(self, tmp: Path):
        self.tmp, self.master_url, self.bridge_ip, self.worker_python = tmp, "local[2]", "127.0.0.1", sys.executable


def throughput(r: dict[str, Any], limit: int) -> dict[str, Any]:
    secs = r["run_secs"]
    return {"sentences_per_s": round(limit / secs, 1),
            "bolt_tuples_per_s": round((r["split_emits"] + r["count_emits"] + limit) / secs, 1),
            "run_secs": secs, "waves": r["waves"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, default=4000)
    p.add_argument("--wave-tuples", type=int, default=400)
    args = p.parse_args()
    reason = unavailable_reason()
    if reason:
        print(json.dumps({"error": reason}))
        return 1
    opts = ["--limit", str(args.limit), "--wave-tuples", str(args.wave_tuples)]
    expected = expected_counts(load_example(), args.limit)
    out: dict[str, Any] = {"bench": "cluster", "limit": args.limit, "wave_tuples": args.wave_tuples}
    ok = True
    with tempfile.TemporaryDirectory(prefix="squall-bench-cluster-") as tmp:
        local = run_job(LocalMaster(Path(tmp)), "wordcount", *opts)  # type: ignore[arg-type]
        ok &= local["counts"] == expected
        out["local_2"] = throughput(local, args.limit)
        with NetnsCluster(Path(tmp) / "netns", workers=3, worker_python=worker_python()) as cluster:
            on = run_job(cluster, "wordcount", *opts)
            ok &= on["counts"] == expected
            out["cluster_3w"] = throughput(on, args.limit)
            loss = worker_loss(cluster, kill_after_waves=4, message_timeout=MESSAGE_TIMEOUT)
    ok &= loss["counts"] == expected_counts(load_example(), loss["limit"]) and loss["given_up"] == 0
    out["cluster_vs_local"] = round(out["cluster_3w"]["bolt_tuples_per_s"] / out["local_2"]["bolt_tuples_per_s"], 3)
    out["worker_loss"] = {"stall_secs": loss["stall_secs"], "stall_goal_secs": STALL_GOAL_SECS,
                          "killed_at_wave": loss["killed_at_wave"], "replayed": loss["replayed"],
                          "spout_failed": loss["spout_failed"], "lost_waves": loss["lost_waves"],
                          "spark_tasks_rerun": loss["failed_tasks"],
                          "victim_tasks_at_kill": loss["victim_tasks_at_kill"],
                          "new_worker_tasks": loss["new_worker_tasks"],
                          "sentences": loss["limit"], "all_acked": loss["spout_acked"] == loss["limit"]}
    out["counts_ok"] = bool(ok)
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
