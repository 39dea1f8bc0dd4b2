"""Runs the Trident word count from a directory of JSON-lines files into SQLite or PostgreSQL
state until everything is committed; the kill test SIGKILLs it at random moments and restarts.

    python tests/support/trident_kill_job.py DATA_DIR sqlite PATH|postgres TABLE transactional|opaque file|shifting
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from squall import Config, LocalCluster  # noqa: E402
from squall.trident import (  # noqa: E402
    Count,
    JsonLinesFileSpout,
    PostgresMapState,
    SQLiteMapState,
    TridentTopology,
)
from tests.support.trident_helpers import ShiftingOpaqueSpout, Split  # noqa: E402


def factory(backend: str, target: str, kind: str):
    if backend == "sqlite":
        return SQLiteMapState.factory(target, kind)
    return PostgresMapState.factory(os.environ.get("SQUALL_PG_DSN"), kind, table=target)


def build(data: str, backend: str, target: str, kind: str, spout_kind: str):
    spout = (JsonLinesFileSpout(data, ["sentence"], batch_size=20) if spout_kind == "file"
             else ShiftingOpaqueSpout(data, max_batch=40))
    t = TridentTopology()
    counts = (t.new_stream("words", spout).each(["sentence"], Split(), ["word"]).parallelism_hint(2)
              .group_by(["word"]).persistent_aggregate(factory(backend, target, kind), Count(), ["count"])
              .parallelism_hint(2))
    return t.build(), counts


def main(argv: list[str]) -> int:
    data, backend, target, kind, spout_kind = argv
    topology, _ = build(data, backend, target, kind, spout_kind)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("kill", {Config.TOPOLOGY_MAX_SPOUT_PENDING: 2}, topology)
        print("STARTED", flush=True)
        spout = cluster.coordinator("kill").spouts[0].spout
        while not spout.idle:
            time.sleep(0.05)
        print("DONE", spout.committed, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
