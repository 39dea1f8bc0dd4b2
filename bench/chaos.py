"""Seeded chaos: three topologies at once on the Spark engine's slots (a Redis Streams word count,
at-least-once; a stateful bolt, exactly-once by its state; a Trident word count into PostgreSQL,
exactly-once) while slot processes, and the driver process itself (then started again from the same
conf) and, with `--host-kills`, whole worker hosts of a namespace cluster (then a new host joins)
are SIGKILLed, and every Redis and PostgreSQL connection of the topologies is cut (through a
forwarding proxy), at points of work done drawn from the seed; every result checked against an
oracle (tests/support/chaos.py). With `--driver-kills 0` the topologies run in this process.
Prints ONE JSON line; each run's seed and figures go to stderr, so a failed seed can be run again
alone with `--seed N --runs 1`. The driver processes run `local[2,4]`.

    .venv/bin/python bench/chaos.py [--runs 20] [--kills 10] [--driver-kills 1] [--host-kills 0] [--cuts 3]
                                    [--seed 1]

With `--host-kills N` every run is on one namespace cluster of 3 worker hosts of a core each (needs
root and iproute2: tests/support/netns_cluster.py), and N of its `--kills` are host kills.

Needs Redis (SQUALL_TEST_REDIS_URL, default redis://127.0.0.1:6379/0) and PostgreSQL (the PG*
variables, default 127.0.0.1:5432, database test, user postgres).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from squall.engine.spark.session import get_or_create_session  # noqa: E402
from tests.support.chaos import Sizes, run_once, run_with_driver_kills  # noqa: E402
from tests.support.netns_cluster import NetnsCluster, unavailable_reason  # noqa: E402
from tests.support.worker_venv import worker_python  # noqa: E402


@contextmanager
def namespace_cluster() -> Iterator[Any]:
    """3 worker hosts of a core each, in network namespaces, for the whole bench (a killed host is
    replaced by a new one)."""
    reason = unavailable_reason()
    if reason:
        sys.exit(f"chaos: --host-kills needs the namespace cluster, which cannot run here: {reason}")
    with tempfile.TemporaryDirectory(prefix="squall-chaos-hosts-") as tmp:
        with NetnsCluster(Path(tmp), workers=3, cores=1, worker_python=worker_python()) as cluster:
            yield cluster


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--kills", type=int, default=10, help="kills per run, the driver kills among them")
    ap.add_argument("--driver-kills", type=int, default=1,
                    help="SIGKILLs of the driver process per run (then a new one from the same conf)")
    ap.add_argument("--host-kills", type=int, default=0,
                    help="SIGKILLs of a worker host per run, on a namespace cluster (root), among --kills")
    ap.add_argument("--cuts", type=int, default=3,
                    help="cuts of every Redis and PostgreSQL connection per run (not counted in --kills)")
    ap.add_argument("--seed", type=int, default=1, help="the first run's seed; run i has seed + i")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYTHONPATH", str(ROOT))  # the executors unpickle the harness's bolts
    redis_url = os.environ.get("SQUALL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    spark = None if args.driver_kills or args.host_kills else get_or_create_session("local[2,4]",
                                                                                     app_name="squall-chaos")
    with ExitStack() as stack:
        hosts = stack.enter_context(namespace_cluster()) if args.host_kills else None
        print(json.dumps(run_all(args, spark, hosts, redis_url)))


FIGURES = ("kills", "driver_kills", "host_kills", "cuts", "rollbacks", "lost", "duplicated_exactly_once", "state_lost")


def run_all(args: argparse.Namespace, spark: Any, hosts: Any, redis_url: str) -> dict:
    """Every seed's run; the figures summed, and the seeds that failed."""
    out: dict = {"bench": "chaos", "runs": 0, **dict.fromkeys(FIGURES, 0), "seeds": [], "seeds_failed": []}
    t0 = time.monotonic()
    for i in range(args.runs):
        seed = args.seed + i
        print(f"seed {seed} ...", file=sys.stderr, flush=True)
        if args.driver_kills or hosts is not None:
            r = run_with_driver_kills(seed, args.kills - args.driver_kills - args.host_kills, args.driver_kills,
                                      redis_url, Sizes(), cuts=args.cuts, hosts=hosts, host_kills=args.host_kills)
        else:
            r = run_once(spark, seed, args.kills, redis_url, Sizes(), cuts=args.cuts)
        problems = "; " + "; ".join(r.problems) if r.problems else ""
        print(f"seed {seed}: {r.kills} kills ({r.driver_kills} of the driver, {r.host_kills} of a host), "
              f"{r.cuts} cuts ({r.connections_cut} connections), {r.rollbacks} rollbacks, lost {r.lost}, "
              f"duplicated {r.duplicated_exactly_once}, state lost {r.state_lost}, {r.secs:.0f} s{problems}",
              file=sys.stderr, flush=True)
        for key in FIGURES:
            out[key] += getattr(r, key)
        out["runs"] += 1
        out["seeds"].append(seed)
        if r.failed:
            out["seeds_failed"].append(seed)
    out["secs"] = round(time.monotonic() - t0, 1)
    return out


if __name__ == "__main__":
    main()
