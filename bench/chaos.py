"""Seeded chaos: three topologies at once on the Spark engine's slots (a Redis Streams word count,
at-least-once; a stateful bolt, exactly-once by its state; a Trident word count into PostgreSQL,
exactly-once) while slot processes are SIGKILLed at points of work done drawn from the seed; every
result checked against an oracle (tests/support/chaos.py). Prints ONE JSON line; each run's seed
and figures go to stderr, so a failed seed can be run again alone with `--seed N --runs 1`.

    .venv/bin/python bench/chaos.py [--runs 20] [--kills 10] [--seed 1] [--master local[2,4]]

Needs Redis (SQUALL_TEST_REDIS_URL, default redis://127.0.0.1:6379/0) and PostgreSQL (the PG*
variables, default 127.0.0.1:5432, database test, user postgres).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from squall.engine.spark.session import get_or_create_session  # noqa: E402
from tests.support.chaos import Sizes, run_once  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--kills", type=int, default=10, help="slot kills per run")
    ap.add_argument("--seed", type=int, default=1, help="the first run's seed; run i has seed + i")
    ap.add_argument("--master", default="local[2,4]")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYTHONPATH", str(ROOT))  # the executors unpickle the harness's bolts
    redis_url = os.environ.get("SQUALL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    spark = get_or_create_session(args.master, app_name="squall-chaos")
    out = {"bench": "chaos", "runs": 0, "kills": 0, "rollbacks": 0, "lost": 0, "duplicated_exactly_once": 0, "state_lost": 0,
           "seeds": [], "seeds_failed": [], "master": args.master}
    t0 = time.monotonic()
    for i in range(args.runs):
        seed = args.seed + i
        print(f"seed {seed} ...", file=sys.stderr, flush=True)
        r = run_once(spark, seed, args.kills, redis_url, Sizes())
        print(f"seed {seed}: {r.kills} kills, {r.rollbacks} rollbacks, lost {r.lost}, duplicated {r.duplicated_exactly_once}, state lost "
              f"{r.state_lost}, {r.secs:.0f} s{'; ' + '; '.join(r.problems) if r.problems else ''}",
              file=sys.stderr, flush=True)
        out["runs"] += 1
        out["kills"] += r.kills
        out["rollbacks"] += r.rollbacks
        out["lost"] += r.lost
        out["duplicated_exactly_once"] += r.duplicated_exactly_once
        out["state_lost"] += r.state_lost
        out["seeds"].append(seed)
        if r.failed:
            out["seeds_failed"].append(seed)
    out["secs"] = round(time.monotonic() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
