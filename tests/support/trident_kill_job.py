"""Runs the Trident word count from a directory of JSON-lines files into SQLite or PostgreSQL
state until everything is committed, reporting each state commit on stdout ("COMMIT txid").

The kill test stops it at a point of the work it chooses, not after some seconds: with
STOP_AT = k > 0, the k-th state commit of this process prints "PAUSED txid" and blocks, either
before its writes reach the store (PHASE "before") or right after (PHASE "after"); the test
SIGKILLs the process there. The state task has parallelism 2, so each batch is two state
commits: an odd k is a batch's first partition, an even k its second.

    python tests/support/trident_kill_job.py DATA_DIR sqlite PATH|postgres TABLE KIND SPOUT RUN STOP_AT PHASE

SPOUT: file, two-files (two spouts merged), shifting, kafka-transactional or kafka-opaque (then
DATA_DIR is the topic, at the Kafka in env SQUALL_KAFKA_BOOTSTRAP, holding {"sentence": ...} records);
KIND: transactional, opaque or non-transactional; RUN seeds the shifting spout's batch sizes
(give each run its own); STOP_AT 0 runs to the end. Prints "DONE committed" when all is in.
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
    BaseFunction,
    Count,
    JsonLinesFileSpout,
    PostgresMapState,
    SQLiteMapState,
    TridentTopology,
)
from tests.support.trident_helpers import (  # noqa: E402
    CommitHooks,
    HookedStateFactory,
    ShiftingOpaqueSpout,
    Split,
)

PHASES = ("before", "after")
PAUSE_LIMIT_SECS = 600  # a paused job nobody killed (its test died) exits on its own

_state_commits = itertools.count(1)  # every state commit of this process, all partitions


def factory(backend: str, target: str, kind: str):
    if backend == "sqlite":
        return SQLiteMapState.factory(target, kind)
    return PostgresMapState.factory(os.environ.get("SQUALL_PG_DSN"), kind, table=target)


class PausingState(CommitHooks):
    """Reports each commit on stdout and pauses at the `stop_at`-th state commit of this
    process, before or after its writes reach the store (`phase`)."""

    def on_begin(self, txid: int) -> None:
        self.number = next(_state_commits)
        print("COMMIT", txid, flush=True)

    def before_commit(self, txid: int) -> None:
        if self.number == self.options["stop_at"] and self.options["phase"] == "before":
            _pause(txid)

    def after_commit(self, txid: int) -> None:
        if self.number == self.options["stop_at"] and self.options["phase"] == "after":
            _pause(txid)


def _pause(txid: int) -> None:
    print("PAUSED", txid, flush=True)
    threading.Event().wait(PAUSE_LIMIT_SECS)
    print("nobody killed the paused job", file=sys.stderr, flush=True)
    os._exit(3)


class KafkaSplit(BaseFunction):
    """{"sentence": ...} (a Kafka record's value) -> its words."""

    def execute(self, t, collector):
        for w in t[0]["sentence"].split():
            collector.emit([w])


def build(data: str, state_factory: Any, spout_kind: str, run: str):
    field, split = "sentence", Split()
    if spout_kind.startswith("kafka-"):
        from squall.connectors.kafka import OpaqueKafkaSpout, TransactionalKafkaSpout

        cls = TransactionalKafkaSpout if spout_kind == "kafka-transactional" else OpaqueKafkaSpout
        spout = cls(os.environ["SQUALL_KAFKA_BOOTSTRAP"], data, scheme="json", batch_size=20)
        field, split = "value", KafkaSplit()
    elif spout_kind == "file":
        spout = JsonLinesFileSpout(data, ["sentence"], batch_size=20)
    elif spout_kind == "two-files":  # two transactional spouts, merged into one state: one txid for both
        return _two_spouts(data, state_factory)
    else:
        spout = ShiftingOpaqueSpout(data, max_batch=40, seed=run)
    t = TridentTopology()
    (t.new_stream("words", spout).each([field], split, ["word"]).parallelism_hint(2)
     .group_by(["word"]).persistent_aggregate(state_factory, Count(), ["count"]).parallelism_hint(2))
    return t.build()


def _two_spouts(data: str, state_factory: Any):
    """The corpus' first 30 files through one spout (batches of 20 lines), the rest through another
    (batches of 13), merged into one count."""
    t = TridentTopology()
    first = JsonLinesFileSpout(data, ["sentence"], batch_size=20, pattern="part-00[0-2]*.jsonl")
    second = JsonLinesFileSpout(data, ["sentence"], batch_size=13, pattern="part-00[3-9]*.jsonl")
    a = t.new_stream("words", first).each(["sentence"], Split(), ["word"]).parallelism_hint(2).project(["word"])
    b = t.new_stream("more", second).each(["sentence"], Split(), ["word"]).parallelism_hint(2).project(["word"])
    t.merge(a, b).group_by(["word"]).persistent_aggregate(state_factory, Count(), ["count"]).parallelism_hint(2)
    return t.build()


def main(argv: list[str]) -> int:
    data, backend, target, kind, spout_kind, run, stop_at, phase = argv
    if phase not in PHASES:
        raise SystemExit(f"PHASE is one of {PHASES}, got {phase!r}")
    state_factory = HookedStateFactory(factory(backend, target, kind), PausingState, stop_at=int(stop_at), phase=phase)
    topology = build(data, state_factory, spout_kind, run)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("kill", {Config.TOPOLOGY_MAX_SPOUT_PENDING: 2}, topology)
        spout = cluster.spout_instances("kill")[0]
        while not spout.idle:
            time.sleep(0.05)
        print("DONE", spout.committed, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
