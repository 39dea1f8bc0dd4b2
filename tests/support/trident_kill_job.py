"""Runs the Trident word count from a directory of JSON-lines files into SQLite or PostgreSQL
state until everything is committed, reporting each state commit on stdout ("COMMIT txid").

The kill test stops it at a point of the work it chooses, not after some seconds: with
STOP_AT = k > 0, the k-th state commit of this process prints "PAUSED txid" and blocks, either
before its writes reach the store (PHASE "before") or right after (PHASE "after"); the test
SIGKILLs the process there. The state task has parallelism 2, so each batch is two state
commits: an odd k is a batch's first partition, an even k its second.

    python tests/support/trident_kill_job.py DATA_DIR sqlite PATH|postgres TABLE KIND file|shifting [STOP_AT PHASE]

KIND: transactional, opaque or non-transactional. Prints "DONE committed" when all is in.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from typing import Any

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

PHASES = ("before", "after")
PAUSE_LIMIT_SECS = 600  # a paused job nobody killed (its test died) exits on its own

_state_commits = itertools.count(1)  # every state commit of this process, all partitions


def factory(backend: str, target: str, kind: str):
    if backend == "sqlite":
        return SQLiteMapState.factory(target, kind)
    return PostgresMapState.factory(os.environ.get("SQUALL_PG_DSN"), kind, table=target)


class PausingState:
    """A map state that reports each commit and pauses at the chosen one; the rest is the
    real state's (the kill lands inside a real commit of the real store)."""

    def __init__(self, inner: Any, stop_at: int, phase: str) -> None:
        self.inner, self.stop_at, self.phase = inner, stop_at, phase
        self.number = 0

    def begin_commit(self, txid: int) -> None:
        self.number = next(_state_commits)
        print("COMMIT", txid, flush=True)
        self.inner.begin_commit(txid)

    def commit(self, txid: int) -> None:
        pause = self.number == self.stop_at
        if pause and self.phase == "before":
            _pause(txid)
        self.inner.commit(txid)
        if pause and self.phase == "after":
            _pause(txid)

    def __getattr__(self, name: str) -> Any:  # multi_get, multi_update, abort, close...
        if name == "inner":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


def _pause(txid: int) -> None:
    print("PAUSED", txid, flush=True)
    threading.Event().wait(PAUSE_LIMIT_SECS)
    print("nobody killed the paused job", file=sys.stderr, flush=True)
    os._exit(3)


class PausingFactory:
    """The real factory, making `PausingState`s; the coordinator's meta store is the real one."""

    def __init__(self, inner: Any, stop_at: int, phase: str) -> None:
        self.inner, self.stop_at, self.phase = inner, stop_at, phase
        self.kind = inner.kind

    def make_state(self, conf: dict, partition_index: int, num_partitions: int) -> PausingState:
        return PausingState(self.inner.make_state(conf, partition_index, num_partitions), self.stop_at, self.phase)

    def meta_store(self, conf: dict | None = None) -> Any:
        return self.inner.meta_store(conf)

    def describe(self) -> str:
        return self.inner.describe()


def build(data: str, state_factory: Any, spout_kind: str):
    spout = (JsonLinesFileSpout(data, ["sentence"], batch_size=20) if spout_kind == "file"
             else ShiftingOpaqueSpout(data, max_batch=40))
    t = TridentTopology()
    (t.new_stream("words", spout).each(["sentence"], Split(), ["word"]).parallelism_hint(2)
     .group_by(["word"]).persistent_aggregate(state_factory, Count(), ["count"]).parallelism_hint(2))
    return t.build()


def main(argv: list[str]) -> int:
    data, backend, target, kind, spout_kind, *stop = argv
    stop_at, phase = (int(stop[0]), stop[1]) if stop else (0, PHASES[0])
    if phase not in PHASES:
        raise SystemExit(f"PHASE is one of {PHASES}, got {phase!r}")
    topology = build(data, PausingFactory(factory(backend, target, kind), stop_at, phase), spout_kind)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("kill", {Config.TOPOLOGY_MAX_SPOUT_PENDING: 2}, topology)
        spout = cluster.coordinator("kill").spouts[0].spout
        while not spout.idle:
            time.sleep(0.05)
        print("DONE", spout.committed, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
