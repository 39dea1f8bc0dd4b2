"""One task of a columnar bolt, in every engine: its input batches become one Arrow batch per
source stream, `execute_batch` runs once per such batch, and what the collector recorded is
turned into children (grouped on the columns), edges and acks in bulk (reliability/columns.py).

It is a BoltTask (same carrying across waves, prepare-on-first-use, error handling around
prepare) whose per-batch step is columnar.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from squall.api.topology import StormTopology
from squall.columnar.acking import ack_rows
from squall.columnar.batch import ColumnBatch, as_columns, concat
from squall.columnar.collector import ColumnarCollector
from squall.columnar.outputs import column_children
from squall.engine.tasks.bolt_task import BoltTask
from squall.engine.tasks.task_result import TaskResult
from squall.observe.errors import ErrorRecord
from squall.reliability.anchoring import Anchors, ack_messages, keys_of, roots_of_rows
from squall.reliability.bolt_trees import batch_anchors, execute_salt
from squall.reliability.columns import anchor_rows, derivable, derived_rows, outputs_per_row, row_ordinals
from squall.reliability.pending import FailReason
from squall.reliability.settled import sent_of, settled_row_ids
from squall.routing.columns import direct_children, route_columns, stream_column_routes

_I64 = np.int64
_U64 = np.uint64


class ColumnarBoltTask(BoltTask):
    """A BoltTask whose bolt is a ColumnarBolt."""

    def __init__(self, topology: StormTopology, component: str, task_index: int, conf: dict, instance: Any,
                 capture: bool = False):
        super().__init__(topology, component, task_index, conf, instance, capture)
        self.collector = ColumnarCollector(component, self.streams, self)
        self.col_routes = {name: stream_column_routes(topology, so, task_index) for name, so in self.streams.items()}

    def prepare(self) -> None:
        if not self.prepared:
            self.prepared = True
            try:
                self.bolt.prepare(self.conf, self.context)
            except BaseException:
                self.prepared = False
                raise

    def run(self, inbox: Sequence[Any], wave: int, now: float | None = None) -> TaskResult:
        return super().run(by_source(inbox), wave, now)

    @property
    def settles_whole(self) -> bool:
        return True  # execute_batch's rows are acked or failed when it returns

    @staticmethod
    def _input_batches(inbox: Sequence[Any]) -> Iterable[Any]:
        return (b for group in inbox for b in group)

    def _run_batch(self, group: Any, wave: int, res: TaskResult) -> None:
        for batch in self._columns(group, res):
            self._run_columns(batch, wave, res)

    def _run_columns(self, batch: ColumnBatch, wave: int, res: TaskResult) -> None:
        t0 = time.perf_counter()
        n = len(batch)
        coll = self.collector
        coll.begin(n, batch.component, batch.stream)
        why = None
        try:
            self.bolt.execute_batch(batch.data, coll)
        except Exception as e:  # noqa: BLE001 - the batch's rows fail; the task goes on
            rec = ErrorRecord.from_exception(self.component, self.task_id, e,
                                             [f"execute_batch on {n} row(s) from {batch.component}:{batch.stream}"])
            res.errors.append(rec)
            why = FailReason("error", self.component, self.task_id, f"{rec.error} (batch of {n} rows)")
            coll.take()
            coll.failed = np.ones(n, bool)
        res.exec_secs += time.perf_counter() - t0
        res.executed += n
        self._settle(batch, res, wave, why)
        res.proc_secs += time.perf_counter() - t0

    def _columns(self, group: list, res: TaskResult) -> list[ColumnBatch]:
        """The group's batches as one ColumnBatch (or one per batch when their column types
        differ); a batch whose rows cannot be columns fails, with an error naming its field."""
        parts = []
        for b in group:
            try:
                parts.append(as_columns(b))
            except TypeError as e:
                rec = ErrorRecord.from_exception(self.component, self.task_id, f"TypeError: {e} (input from "
                                                 f"{b.component}:{b.stream}, {len(b)} rows)")
                res.errors.append(rec)
                self._fail_all(b, res, FailReason("error", self.component, self.task_id, rec.error))
        if len(parts) < 2:
            return parts
        try:
            return [concat(parts)]
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):  # types differ: one by one
            return parts

    @staticmethod
    def _fail_all(b: Any, res: TaskResult, why: FailReason) -> None:
        res.failed += len(b)
        if b.anc_root is not None:
            for r in np.unique(b.anc_root).tolist():
                res.fail_roots.append(r)
                res.fail_reasons.append(why)

    def _settle(self, batch: ColumnBatch, res: TaskResult, wave: int, why: FailReason | None) -> None:
        """Children, edges, acks and fails of one executed batch, all in numpy."""
        emits, failed = self.collector.take()
        n = len(batch)
        tracked = batch.tracked_rows
        # the rows' roots are read only when a row anchors children, fails or sends an ack message
        # (a settled batch's roots may be kept as runs until then: squall.columnar.batch)
        anchors = None
        out_ack = np.zeros(n, _U64)
        salt = execute_salt(self.task_id, wave)
        keys = None  # made once an emit anchors children (a bolt that only acks needs none)
        base = None  # per input row, its outputs in the emits before (None: no emit before)
        for i, em in enumerate(emits):
            so, data = em.so, em.data
            if res.captured is not None:
                res.captured.setdefault(so.stream, []).extend(ColumnBatch("", "", so.fields, 0, data).values)
            if em.tasks is not None:
                child_row, child_target = direct_children(em.tasks, data.num_rows, so)
            else:
                child_row, child_target = route_columns(self.col_routes[so.stream], data)
            child_anchors = derive = None
            settle: set[int] = set()
            if tracked and em.anchors is not None and len(child_row):
                if anchors is None:
                    anchors = batch_anchors(batch)
                if derivable(anchors, em.anchors, child_row):
                    child_anchors, derive, settle = derived_rows(anchors, em.anchors, child_row, child_target,
                                                                 out_ack, salt, res.emitted, self.settle_to)
                else:
                    if keys is None:
                        keys = keys_of(anchors, salt, settled_row_ids(batch))
                    child_anchors = anchor_rows(anchors, keys, em.anchors, row_ordinals(em.anchors, base),
                                                child_row, child_target, out_ack)
                if i + 1 < len(emits):
                    base = outputs_per_row(em.anchors, base, n)
            children = column_children(self.component, self.task_id, so, data, child_row, child_target,
                                       child_anchors, derive, settle)
            res.outputs.extend(children)
            if settle:
                res.sent.extend(sent_of(children))
            res.emitted += data.num_rows  # after: the rows emitted before an emit tell it apart (its salt)
        n_failed = int(failed.sum())
        res.acked += n - n_failed
        res.failed += n_failed
        if not tracked:
            return
        if n_failed < n and (anchors is not None or not batch.settled):  # else no row's ack travels
            rows = ack_rows(batch, failed, n_failed, out_ack)
            if rows is None or len(rows):
                r, v = ack_messages(anchors or batch_anchors(batch), rows, out_ack)
                res.ack_roots.append(r)
                res.ack_vals.append(v)
        if n_failed:
            self._fail_roots(anchors or batch_anchors(batch), np.flatnonzero(failed), res,
                             why or FailReason("failed", self.component, self.task_id))

    @staticmethod
    def _fail_roots(anchors: Anchors, rows: np.ndarray, res: TaskResult, why: FailReason) -> None:
        _, roots = roots_of_rows(anchors, rows)
        for r in np.unique(roots).tolist():
            res.fail_roots.append(r)
            res.fail_reasons.append(why)


def by_source(inbox: Sequence[Any]) -> list[list]:
    """Input batches grouped by (source component, stream), in arrival order: one
    execute_batch per group."""
    groups: dict[tuple[str, str], list] = {}
    for b in inbox:
        if len(b):
            groups.setdefault((b.component, b.stream), []).append(b)
    return [_Group(g) for g in groups.values()]


class _Group(list):
    """Batches of one source stream; looks like one batch to BoltTask.run (its length, its roots)."""

    def __len__(self) -> int:
        return sum(map(len, self.__iter__()))

    @property
    def anc_root(self) -> np.ndarray | None:
        roots = [b.anc_root for b in self.__iter__() if b.anc_root is not None]
        return np.concatenate(roots) if roots else None
