"""How a micro-batch's rows reach a topology's spout tasks without passing through the driver.

The driver runs one Spark job over the batch: each partition's task writes its rows as an Arrow
IPC file in the sink's directory (under squall.checkpoint.dir, which every slot can read) and
returns only its row count. The driver then writes a manifest naming the files and each file's
first row number. The `RowsSpout` tasks, in the slots, find the manifest, read their share of the
files and emit the rows. When every row of its share is acked or dead-lettered, a spout task
writes a done file with its counts and dead letters, which the driver reads.

A hand-off is numbered by the sink (`seq`), not by Spark's batch id: a query restarted from its
checkpoint may hand the same batch id over again. The files outlive their batch by a few
hand-offs, so a spout task rolled back to an older snapshot can read its rows again.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from squall.api.components import Spout
from squall.connectors.dead_letters import Failure, one_line

log = logging.getLogger("squall.spark")

CHUNK_ROWS = 2048  # rows emitted by one next_tuple call, at most
LOOK_EVERY_SECS = 0.002  # how often an idle spout task looks for the next manifest


def manifest_path(directory: str, seq: int) -> str:
    return os.path.join(directory, f"batch-{seq:09d}.json")


def done_path(directory: str, seq: int, task_index: int) -> str:
    return os.path.join(directory, f"done-{seq:09d}-{task_index}.json")


def rows_dir(directory: str, seq: int) -> str:
    return os.path.join(directory, f"rows-{seq:09d}")


def write_json(path: str, obj: Any) -> None:
    """Written whole or not at all: a reader never sees half a file."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, default=repr)
    os.replace(tmp, path)


def write_partitions(batch_df: Any, directory: str, seq: int) -> list[list]:
    """Run the Spark job that writes each partition of `batch_df` as an Arrow file; the non-empty
    ones as `[path, first row number, rows]`, in partition order. Only counts reach the driver."""
    out = rows_dir(directory, seq)

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext  # noqa: PLC0415 - runs on an executor

        tc = TaskContext.get()
        part = tc.partitionId() if tc is not None else 0
        path = os.path.join(out, f"part-{part:05d}.arrow")
        tmp = f"{path}.{os.getpid()}.{tc.attemptNumber() if tc is not None else 0}.tmp"
        rows = 0
        writer = None
        try:
            for b in batches:
                if b.num_rows == 0:
                    continue
                if writer is None:
                    os.makedirs(out, exist_ok=True)
                    writer = pa.ipc.new_file(tmp, b.schema)
                writer.write_batch(b)
                rows += b.num_rows
        finally:
            if writer is not None:
                writer.close()
        if writer is not None:
            os.replace(tmp, path)  # a retried task writes the same rows again: the last one stands
        yield pa.record_batch([pa.array([part], pa.int32()), pa.array([rows], pa.int64()),
                               pa.array([path if rows else ""])], names=["part", "rows", "path"])

    got = sorted((r["part"], r["rows"], r["path"]) for r in
                 batch_df.mapInArrow(write, "part int, rows long, path string").collect())
    parts, first = [], 0
    for _, rows, path in got:
        if rows:
            parts.append([path, first, rows])
            first += rows
    return parts


@dataclass
class _Share:
    """One spout task's share of one hand-off: which files, what is pending, what is done."""

    seq: int
    batch_id: int
    parts: list[list]  # [path, first row, rows] of this task's files
    starts: list[int] = field(default_factory=list)  # each part's first row (bisect)
    part: int = 0  # the part being emitted the first time
    offset: int = 0  # rows of it emitted
    pending: dict[int, int] = field(default_factory=dict)  # row -> its delivery (1 = the first)
    replay: deque = field(default_factory=deque)  # (row, delivery) to emit again
    acked: int = 0
    replayed: int = 0
    dead: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.starts = [p[1] for p in self.parts]

    @property
    def rows(self) -> int:
        return sum(p[2] for p in self.parts)

    @property
    def finished(self) -> bool:
        return self.part >= len(self.parts) and not self.pending and not self.replay


class RowsSpout(Spout):
    """The spout a `TopologySink` adds: emits each micro-batch's rows (fields: the DataFrame's
    columns; msg id `(batch_id, row number)`), replays a failed row up to `squall.max.replays`
    times, then dead-letters it with its last error."""

    def __init__(self, fields: list[str], directory: str):
        self.fields = list(fields)
        self.directory = directory
        self.seq = 0  # the last hand-off this task finished
        self._share: _Share | None = None
        self._tables: dict[str, pa.Table] = {}
        self._looked = 0.0

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_tables"] = {}  # read from the files again: a snapshot holds positions, not rows
        return state

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.fields)

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self._collector = collector
        self.component = context.this_component_id
        self.task_id = context.this_task_id
        self.task_index = context.this_task_index
        self.ntasks = len(context.component_tasks(self.component))
        self.topology = conf.get("topology.name", "")
        self.max_replays = int(conf.get("squall.max.replays", 3))
        pending = conf.get("topology.max.spout.pending")
        self.max_pending = int(pending) if pending else None

    # -- emitting -----------------------------------------------------------------------------

    def next_tuple(self) -> None:
        share = self._share
        if share is None:
            share = self._share = self._next_share()
            if share is None:
                return
        room = CHUNK_ROWS if self.max_pending is None else min(CHUNK_ROWS, self.max_pending - len(share.pending))
        if room <= 0:
            return
        if share.replay:
            self._emit_again(share, room)
        elif share.part < len(share.parts):
            self._emit_new(share, room)
        if share.finished:
            self._finish(share)

    def _next_share(self) -> _Share | None:
        now = time.monotonic()
        if now - self._looked < LOOK_EVERY_SECS:
            return None
        self._looked = now
        path = manifest_path(self.directory, self.seq + 1)
        try:
            with open(path, encoding="utf-8") as f:
                m = json.load(f)
        except FileNotFoundError:
            return None
        mine = [p for i, p in enumerate(m["parts"]) if i % self.ntasks == self.task_index]
        if any(not os.path.exists(p[0]) for p in mine):  # only after a rollback to a long-gone hand-off
            log.warning("squall: %s[%d]: the rows of hand-off %d are gone (the driver saw it done); skipped",
                        self.component, self.task_id, m["seq"])
            mine = []
        self._tables = {}
        return _Share(m["seq"], m["batch_id"], mine)

    def _table(self, path: str) -> pa.Table:
        t = self._tables.get(path)
        if t is None:
            with pa.memory_map(path) as source:
                t = self._tables[path] = pa.ipc.open_file(source).read_all()
        return t

    def _emit_new(self, share: _Share, room: int) -> None:
        path, first, rows = share.parts[share.part]
        n = min(room, rows - share.offset)
        start = first + share.offset
        bid = share.batch_id
        batch = self._table(path).slice(share.offset, n).combine_chunks().to_batches()
        ids = [(bid, r) for r in range(start, start + n)]
        share.pending.update(dict.fromkeys(range(start, start + n), 1))
        for b in batch:  # one record batch, unless the column types split it
            k = b.num_rows
            self._collector.emit_batch(b, msg_ids=ids[:k])
            ids = ids[k:]
        share.offset += n
        if share.offset >= rows:
            share.part += 1
            share.offset = 0

    def _values(self, share: _Share, row: int) -> list:
        i = bisect.bisect_right(share.starts, row) - 1
        path, first, _ = share.parts[i]
        return list(self._table(path).slice(row - first, 1).to_pylist()[0].values())

    def _emit_again(self, share: _Share, room: int) -> None:
        for _ in range(min(room, len(share.replay))):
            row, delivery = share.replay.popleft()
            share.pending[row] = delivery
            self._collector.emit(self._values(share, row), msg_id=(share.batch_id, row))

    # -- verdicts -----------------------------------------------------------------------------

    def ack(self, msg_id: Any) -> None:
        share = self._share
        if share is not None and msg_id[0] == share.batch_id and share.pending.pop(msg_id[1], None) is not None:
            share.acked += 1

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        share = self._share
        if share is None or msg_id[0] != share.batch_id:
            return
        row = msg_id[1]
        delivery = share.pending.pop(row, None)
        if delivery is None:
            return
        if delivery <= self.max_replays:
            share.replayed += 1
            share.replay.append((row, delivery + 1))
            return
        f = Failure.from_reason(reason, delivery)
        share.dead.append({"topology": self.topology, "component": self.component, "task": self.task_id,
                           "msg_id": [share.batch_id, row], "attempts": delivery, "reason": f.kind,
                           "error": one_line(f.error or f.kind), "failed_in": f.component,
                           "values": dict(zip(self.fields, self._values(share, row)))})

    def _finish(self, share: _Share) -> None:
        write_json(done_path(self.directory, share.seq, self.task_index),
                   {"seq": share.seq, "batch_id": share.batch_id, "task": self.task_id, "rows": share.rows,
                    "acked": share.acked, "replayed": share.replayed, "dead": share.dead})
        self.seq = share.seq
        self._share = None
        self._tables = {}
