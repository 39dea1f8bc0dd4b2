"""The chaos harness's driver process (tests/support/chaos.py, `run_with_driver_kills`): runs the
three chaos topologies of one seed on its own Spark session until all their work is done, killing
its own slots at the work-done points it is given, and prints its progress so that the harness can
SIGKILL it (driver, JVM, Python workers) at points of its own and start it again from the same
conf. Every topology resumes from what outlives the process: the Redis stream and its consumer
group, the SQLite state and ack files, the PostgreSQL state and Trident metadata.

    python tests/support/chaos_job.py SEED WORK_DIR REDIS_URL SLOT_KILL_POINTS START TAG \
        [VIA_REDIS VIA_DSN [MASTER DRIVER_HOST WORKER_PYTHON SHARED]]

VIA_REDIS and VIA_DSN are where the topologies connect when the harness cuts connections (its
proxies); the oracles read Redis at REDIS_URL. With MASTER the job runs on that Spark cluster (a
namespace cluster whose hosts the harness kills), its executors on WORKER_PYTHON, with SHARED as
the directory every host sees (WORK_DIR is in it).

Prints "PROGRESS <work done> <settled>" lines, "KILLED <slot kills>" after each slot kill, and,
once the harness writes "STOP" to its stdin, "DONE <rollbacks>" (the recoveries this process's
topologies went through). Settled (1): all work done for QUIET_POLLS polls in a row and every
slot kill point executed; a point the work outran is executed once the work has been done as long.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import random
import signal
import sys
import threading
import time
import zlib
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from squall import LocalCluster  # noqa: E402
from squall.engine.spark.session import get_or_create_session  # noqa: E402
from tests.support.chaos import QUIET_POLLS, Chaos, Sizes, kill_a_slot  # noqa: E402


def cluster_session(seed: int, master: str, driver_host: str, worker_python: str, shared: str) -> tuple[Any, dict]:
    """A session on a namespace cluster (as tests/support/netns_job.py makes one), and the conf its
    topologies need there: snapshots and SQLite files on the shared directory."""
    os.environ["PYSPARK_PYTHON"] = worker_python
    spark = get_or_create_session(master, app_name=f"squall-chaos-hosts-{seed}", extra_conf={
        "spark.driver.host": driver_host,
        "spark.driver.bindAddress": driver_host,
        "spark.pyspark.python": worker_python,
        "spark.executorEnv.PYSPARK_PYTHON": worker_python,
        "spark.executorEnv.PYTHONPATH": "",  # nothing of the driver's checkout: squall and the harness ship
        "spark.executor.memory": "768m",
        "spark.task.maxFailures": "4",
    })
    return spark, {"squall.checkpoint.dir": os.path.join(shared, "checkpoints"), "squall.shared.paths": [shared]}


def wait_for_stop(stop: threading.Event) -> None:
    """Set `stop` when the harness says STOP (or is gone: its end of stdin closed)."""
    for line in sys.stdin:
        if line.strip() == "STOP":
            break
    stop.set()


def main(argv: list[str]) -> int:
    # what a failed run's kept log shows: squall's warnings (deaths, rollbacks) with their time,
    # and every thread's stack when the harness gives up on this process (SIGUSR1)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    seed, work, redis_url, points, start, tag = int(argv[0]), argv[1], argv[2], argv[3], int(argv[4]), argv[5]
    slot_points = sorted(int(p) for p in points.split(",") if p)
    rng = random.Random(zlib.crc32(f"chaos-job/{seed}/{start}".encode()))  # which slots die: from the seed
    extra: dict = {}
    if len(argv) > 8:
        spark, extra = cluster_session(seed, *argv[8:12])
    else:
        spark = get_or_create_session("local[2,4]", app_name=f"squall-chaos-{seed}")
    chaos = Chaos(seed, redis_url, Sizes(), work, tag)
    if len(argv) > 6:
        chaos.via_redis, chaos.via_dsn = argv[6], argv[7] or None
    kills = 0
    stop = threading.Event()
    threading.Thread(target=wait_for_stop, args=(stop,), daemon=True).start()
    with LocalCluster(engine="spark", spark=spark) as cluster:
        chaos.submit(cluster, extra)
        last, quiet = -1, 0
        while not stop.is_set():
            work_done, done = chaos.progress(cluster)
            quiet = quiet + 1 if done else 0
            print("PROGRESS", work_done, int(quiet >= QUIET_POLLS and not slot_points), flush=True)
            if slot_points and (work_done >= slot_points[0] and work_done > last or quiet >= QUIET_POLLS):
                slot_points.pop(0)
                kill_a_slot(cluster, rng)
                kills += 1
                last, quiet = work_done, 0
                print("KILLED", kills, flush=True)
                continue
            time.sleep(0.05)
        rollbacks = sum(cluster.coordinator(name).rollbacks for name in ("core", "stateful", "trident"))
    print("DONE", rollbacks, flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
