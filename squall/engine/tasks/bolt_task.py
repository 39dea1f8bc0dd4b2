"""One task of a bolt, in every engine: runs the user's code over its input batches and hands
what the collector recorded to the reliability rules (squall.reliability.bolt_trees), which
compute ids, anchors and ack messages for the whole batch at once."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from squall.api.basic_bolt import BasicBoltExecutor
from squall.api.collectors import OUTSIDE, LeanEmits, OutputCollector, Recorded
from squall.api.components import BasicBolt, Bolt, user_instance
from squall.api.config import Config
from squall.api.rebinding import restoring
from squall.api.topology import StormTopology
from squall.engine.gc_tuning import gc_paused
from squall.engine.tasks import fixed_parts
from squall.engine.tasks.fixed_parts import FixedPart, Watch, fixed_names
from squall.engine.tasks.outputs import bucket_children, group_children
from squall.engine.tasks.task import TaskBase
from squall.engine.tasks.task_result import TaskResult
from squall.observe.errors import ErrorRecord
from squall.reliability.batch import TupleBatch
from squall.reliability.bolt_trees import BatchTrees, execute_salt, settle_held
from squall.reliability.emits import emit_ordinals, index_emits
from squall.reliability.held import HeldRows
from squall.reliability.ids import mix64_int
from squall.reliability.pending import FailReason
from squall.reliability.settled import Settled, mark_settling, sent_of, settled_row_ids
from squall.reliability.tuple import Tuple, tuples_of

log = logging.getLogger("squall")

_NO_INPUT = TupleBatch("", "", (), -1, [])  # what emits outside any execute (finish_wave) belong to


class BoltTask(TaskBase):
    """One task of a bolt: its instance, collector and routing, carried from wave to wave."""

    def __init__(self, topology: StormTopology, component: str, task_index: int, conf: dict, instance: Any,
                 capture: bool = False):
        super().__init__(topology, component, task_index, conf, capture)
        self.bolt = BasicBoltExecutor(instance) if isinstance(instance, BasicBolt) else instance
        self.collector = OutputCollector(component, self.streams, self, record_all=capture or self.debug)
        self.prepared = False
        self.settle_to = topology.settling_tasks()  # batches to them travel with no edges (reliability/settled.py)
        self.settling = np.array(sorted(self.settle_to), np.int64) if self.settle_to else None
        self._bucket_tasks: np.ndarray | None = None  # lean bucket -> target task id (made on first use)
        self._buckets_settle = False  # every lean bucket's task settles whole (reliability/settled.py)
        # fixed_attributes (engine/tasks/fixed_parts.py): as last carried, and as this process watches them
        self._fixed: FixedPart | None = None
        self._watch: Watch | None = None
        self._fixed_off = False  # changed in place once: the instance is carried whole from then on
        self._fixed_told: frozenset[str] = frozenset()  # declared names found missing, reported once

    @functools.cached_property
    def _failed_here(self) -> FailReason:
        """The reason of an input this task's bolt failed without giving one."""
        return FailReason("failed", self.component, self.task_id)

    @property
    def settles_whole(self) -> bool:
        """Whether this task acks or fails every input when `execute` returns (a BasicBolt's): it
        holds none, and every tuple it acks is a row of the batch being run."""
        return type(self.bolt) is BasicBoltExecutor

    def _note_settled(self, inbox: Sequence[Any], res: TaskResult) -> None:
        """Every input acked, failed or held with an edge of its own by now (hold_pending): the
        batches sent here with no edges are settled."""
        res.settled.extend(Settled(b.anc_settle, len(b)) for b in self._input_batches(inbox)
                           if getattr(b, "anc_settle", None) is not None and len(b))

    @staticmethod
    def _input_batches(inbox: Sequence[Any]) -> Iterable[Any]:
        return inbox

    @property
    def _has_finish_wave(self) -> bool:
        hook = getattr(type(self.bolt), "finish_wave", None)
        return hook is not None and hook is not Bolt.finish_wave

    def prepare(self) -> None:
        if not self.prepared:
            self.prepared = True
            try:
                self.bolt.prepare(self.conf, self.context, self.collector)
            except BaseException:
                self.prepared = False  # tried again with the next input
                raise

    def cleanup(self) -> None:
        self.bolt.cleanup()

    # -- carried across waves as bytes (Spark engine) -------------------------------------

    def snapshot(self, dumps: Any, wave: int = 0) -> tuple[bytes, FixedPart | None]:
        """The task's carried state: the bolt instance (without its fixed attributes), whether it is
        prepared, routing counters; and its fixed attributes, pickled only when new."""
        inst = user_instance(self.bolt)
        fixed = self._fixed_objects(inst)
        for name in fixed:
            del inst.__dict__[name]
        try:
            blob = dumps((self.bolt, self.prepared, self.routing_state(), self._late_errors,
                          self.context.metrics, (self._fixed_off, self._fixed_told)))
        except Exception as e:
            raise TypeError(
                f"bolt {self.component!r} (task {self.task_id}) cannot be carried to the next wave: {e}. The Spark "
                "engine keeps each bolt instance between waves by pickling it: keep connections, locks and files "
                "out of its attributes (open them on first use and leave them out in __getstate__)"
            ) from e
        finally:
            inst.__dict__.update(fixed)
        if not fixed:
            return blob, None
        watch = self._watch
        if self._fixed is None or watch is None or not watch.same_objects(fixed):
            self._fixed, self._watch = fixed_parts.made(self._fixed_key(), fixed, wave, dumps, self._check_every > 0,
                                                        watch)
        return blob, self._fixed

    @classmethod
    def restore(cls, topology: StormTopology, component: str, task_index: int, conf: dict, blob: bytes,
                loads: Any, capture: bool = False, fixed: FixedPart | None = None, wave: int = 0) -> BoltTask:
        task = cls(topology, component, task_index, conf, None, capture)
        with restoring(task):
            (task.bolt, task.prepared, routing, task._late_errors, task.context.metrics,
             (task._fixed_off, task._fixed_told)) = loads(blob)
            if fixed is not None:
                task._watch = fixed_parts.received(task._fixed_key(), fixed, wave, loads, task._check_every > 0)
                task._fixed = fixed
                user_instance(task.bolt).__dict__.update(task._watch.objects)
        task.restore_routing(routing)
        return task

    @property
    def _check_every(self) -> int:
        return int(self.conf.get(Config.SQUALL_FIXED_CHECK_WAVES, 25) or 0)

    def _fixed_key(self) -> tuple:
        return id(self.topology), self.component, self.task_index

    def _fixed_objects(self, inst: Any) -> dict[str, Any]:
        """The declared fixed attributes the instance has now (none once one changed in place)."""
        if self._fixed_off:
            return {}
        attrs = getattr(inst, "__dict__", None)
        names = fixed_names(inst)
        return {n: attrs[n] for n in names if n in attrs} if names and attrs is not None else {}

    def _check_fixed(self, wave: int, res: TaskResult) -> None:
        """After a prepared step: a declared name the bolt lacks is reported once; the fixed
        attributes are watched, and checked every squall.fixed.check.waves waves for a change in place."""
        inst = user_instance(self.bolt)
        names = fixed_names(inst)
        if not names or self._fixed_off or not self.prepared:
            return
        fixed = self._fixed_objects(inst)
        missing = set(names) - fixed.keys() - self._fixed_told
        if missing:
            self._fixed_told |= missing
            res.errors.append(ErrorRecord.from_exception(
                self.component, self.task_id,
                f"UserError: fixed_attributes names {sorted(missing)}, but the bolt has no such attribute after "
                "prepare and a wave: nothing is carried once for it (a misspelled name?)", kind="user"))
        if not fixed:
            return
        if self._watch is None or not self._watch.same_objects(fixed):  # new, or assigned anew
            self._watch, self._fixed = Watch(fixed, wave, self._check_every > 0), None
            return
        changed = self._watch.changed(wave, self._check_every)
        if changed:
            self._fixed_off = True
            fixed_parts.drop(self._fixed_key())
            self._fixed = self._watch = None
            res.errors.append(ErrorRecord.from_exception(
                self.component, self.task_id,
                f"UserError: fixed attribute(s) {changed} changed in place. A fixed attribute is only read once "
                "built; to change one, assign a new object. Its waves before this check may have read an older "
                "copy on another Python worker; this task now carries its whole instance every wave",
                kind="user"))

    # -- called by the collector ----------------------------------------------------------

    def check_anchors(self, anchors: Any) -> tuple[Tuple, ...] | None:
        """Validate anchors; drop (and report) duplicates and tuples already acked or failed."""
        if type(anchors) is Tuple:
            anchors = (anchors,)
        elif type(anchors) in (list, tuple) and len(anchors) == 2:  # a join's two inputs, each emit of it
            a, b = anchors
            if type(a) is Tuple and type(b) is Tuple and a is not b and not a._done and not b._done:
                return (a, b)
        elif type(anchors) is HeldRows:  # many held rows at once (a window): checked by their store
            return anchors if len(anchors) else None
        elif not isinstance(anchors, (list, tuple)):
            raise TypeError(
                f"bolt {self.component!r}: anchors must be an input Tuple or a list of them, got {anchors!r}"
            )
        out: list[Tuple] = []
        seen: set[int] = set()
        for a in anchors:
            if type(a) is not Tuple:
                raise TypeError(f"bolt {self.component!r}: anchors must be input Tuples received by execute, got {a!r}")
            if a._done:
                self._misuse(a, "emit anchored to a tuple that was already {was}; that anchor is ignored "
                                "(emit anchored children before acking their input)")
            elif id(a) not in seen:  # [t, t] anchors once, as Storm's XORs net out
                seen.add(id(a))
                out.append(a)
        return tuple(out) if out else None

    def twice(self, t: Tuple, op: str) -> None:
        self._misuse(t, f"{op}() on a tuple that was already {{was}}; ignored (each input is acked or failed once)")

    def _misuse(self, t: Tuple, text: str) -> None:
        was = "acked" if t._done == 1 else "failed"
        self._error(ErrorRecord.from_exception(self.component, self.task_id, "UserError: " + text.format(was=was),
                                               t.values, kind="user"))

    # -- the wave -------------------------------------------------------------------------

    def run(self, inbox: Sequence[TupleBatch], wave: int, now: float | None = None) -> TaskResult:
        """One wave of this task. `now`: the wave's time on the topology clock (simulated or
        epoch secs), which bolts read as `context.wave_time`."""
        self.context.wave_time = time.time() if now is None else now
        res = self._res = self._new_result()
        if not self._prepared_for(inbox, res):
            self._res = None
            self._note_settled(inbox, res)
            return res
        try:
            with gc_paused(self.conf.get(Config.SQUALL_GC_TUNE, True)):
                for batch in inbox:
                    if len(batch):
                        self._run_batch(batch, wave, res)
                if inbox and self._has_finish_wave:
                    self._finish_wave(self.bolt.finish_wave, wave, res)
        finally:
            self._res = None
        res.metrics = self.context.metrics.take()  # what the user's metrics did this wave
        self._note_settled(inbox, res)
        self._check_fixed(wave, res)
        return res

    def _prepared_for(self, inbox: Sequence[TupleBatch], res: TaskResult) -> bool:
        """Prepare on first use, the same on every engine. If `prepare` raises, the error is
        recorded, this wave's inputs of the task fail (reason "error") and the next wave tries again."""
        try:
            self.prepare()
            return True
        except Exception as e:  # noqa: BLE001 - the task's inputs fail; the topology goes on
            rec = ErrorRecord.from_exception(self.component, self.task_id, e)
            res.errors.append(rec)
            why = FailReason("error", self.component, self.task_id, f"prepare() raised: {rec.error}")
            for batch in inbox:
                res.failed += len(batch)
                if batch.anc_root is not None:
                    for r in np.unique(batch.anc_root).tolist():
                        res.fail_roots.append(r)
                        res.fail_reasons.append(why)
            return False

    def _finish_wave(self, finish: Any, wave: int, res: TaskResult) -> None:
        """The optional bolt hook (squall.api.components.Bolt.finish_wave)."""
        try:
            finish()
        except Exception as e:  # noqa: BLE001 - reported; tuples it held fail by timeout or replay
            res.errors.append(ErrorRecord.from_exception(self.component, self.task_id, e))
        self._flush(_NO_INPUT, [], res, wave)

    def _run_batch(self, batch: TupleBatch, wave: int, res: TaskResult) -> None:
        coll = self.collector
        execute = self.bolt.execute
        t0 = time.perf_counter()
        if self._rows_hook is not None and self._took_whole(batch, res):
            res.exec_secs += time.perf_counter() - t0
            res.executed += len(batch)
            self._flush(batch, [], res, wave)
            res.proc_secs += time.perf_counter() - t0
            return
        tuples: list[Tuple] = []
        # a task that captures or logs (debug) its emits and acks keeps a Tuple per row
        if type(self.bolt) is BasicBoltExecutor and not coll._record_all:
            self.bolt.execute_rows(batch, lambda t, e: self._execute_raised(t, e, res))
        elif type(self.bolt) is BasicBoltExecutor:
            tuples = tuples_of(batch)
            coll.begin_batch(batch, tuples)
            self.bolt.execute_all(tuples, lambda t, e: self._execute_raised(t, e, res))
        else:
            tuples = tuples_of(batch)
            coll.begin_batch(batch, tuples)
            nb, one = coll._nb, coll._one
            for i, t in enumerate(tuples):
                coll.input_row = i
                coll._current = one[0] = t  # its emits may take the lean path (OutputCollector.emit)
                coll._key = i * nb
                try:
                    execute(t)
                except Exception as e:  # the input fails; the task goes on
                    self._execute_raised(t, e, res)
            coll._current = one[0] = OUTSIDE
        coll.input_row = -1
        res.exec_secs += time.perf_counter() - t0
        res.executed += len(batch)
        self._flush(batch, tuples, res, wave)
        res.proc_secs += time.perf_counter() - t0

    def _execute_raised(self, t: Tuple, e: Exception, res: TaskResult) -> None:
        rec = ErrorRecord.from_exception(self.component, self.task_id, e, t.values)
        res.errors.append(rec)
        self.collector.fail_with_reason(t, FailReason("error", self.component, self.task_id, rec.error))

    @property
    def _rows_hook(self) -> Any:
        """`_execute_rows(batch) -> bool` of a bolt squall wraps (a windowed bolt's executor): it
        takes a whole input batch without Tuple objects, or declines it (False)."""
        return getattr(self.bolt, "_execute_rows", None)

    def _took_whole(self, batch: TupleBatch, res: TaskResult) -> bool:
        """Offer `batch` to the bolt's bulk path. If that raises, the error is reported once and
        the bolt has failed the batch's rows itself."""
        try:
            return bool(self.bolt._execute_rows(batch))
        except Exception as e:  # noqa: BLE001 - the batch fails; the task goes on
            res.errors.append(ErrorRecord.from_exception(self.component, self.task_id, e,
                                                         [f"a batch of {len(batch)} row(s)"]))
            return True

    def _flush(self, batch: TupleBatch, tuples: list[Tuple], res: TaskResult, wave: int) -> None:
        """Hand what the collector recorded for `batch` to the reliability rules, in bulk."""
        rec = self.collector.take_recorded()
        trees = BatchTrees(batch)
        res.emitted += len(rec.emits) + rec.unrouted + (len(rec.lean) if rec.lean is not None else 0)
        if res.captured is not None:
            self._capture(res, rec.emits)
        if rec.emits or rec.lean is not None:
            salt = execute_salt(self.task_id, wave)
            if rec.lean is not None:
                children, child_anchors = self._lean_children(rec.lean, trees, salt)
            else:
                ix = index_emits(batch, rec.emits)
                row_ids = settled_row_ids(batch) if trees.anchors is not None else None
                child_anchors = trees.children(ix, salt, self.settling, row_ids)
                children = group_children(self.component, self.task_id, len(self.streams), ix, child_anchors)
            if child_anchors is not None and self.settling is not None:
                mark_settling(children, self.settle_to, salt, len(res.outputs))
                res.sent.extend(sent_of(children))
            res.outputs.extend(children)
        if rec.acks or rec.ack_rows or rec.fails or rec.resets:
            res.acked += len(rec.acks) + len(rec.ack_rows)
            res.failed += len(rec.fails)
            held = getattr(self.bolt, "held_acks", None)  # a bolt that holds its acks (a stateful bolt)
            sink = res if held is None else held.sink_for(res)
            trees.settle(rec, sink, self._failed_here, own_acks=self.settles_whole)
        if rec.held:
            settle_held(rec.held, res, res)
        if self.debug:
            self._log(rec)
        if trees.tracked and not self.settles_whole:  # a BasicBolt holds none
            trees.hold(tuples, res, mix64_int(execute_salt(self.task_id, wave) ^ res.executed))  # per batch

    def _lean_children(self, lean: LeanEmits, trees: BatchTrees,
                       salt: int) -> tuple[list[tuple[int, TupleBatch]], Any]:
        """The children of the lean path's emits (each anchored to the input that emitted it, some
        to one more input, already split by destination), and their anchors_to_ids (None: none
        tracked)."""
        if not trees.tracked:
            return bucket_children(self.component, self.task_id, lean, None, None), None
        keys = np.array(lean.keys, np.int64)
        others = lean.others(keys)
        rows, bucket = np.divmod(keys, len(lean.buckets))
        if self._bucket_tasks is None:
            self._bucket_tasks = np.array([t for _, t in lean.buckets], np.int64)
            self._buckets_settle = self.settling is not None and bool(np.isin(self._bucket_tasks, self.settling).all())
        child_anchors = trees.own_row_children(rows, emit_ordinals(rows), self._bucket_tasks[bucket], salt,
                                               self.settling, settled_row_ids(trees.batch), self._buckets_settle,
                                               others)
        return bucket_children(self.component, self.task_id, lean, bucket, child_anchors), child_anchors

    def _log(self, rec: Recorded) -> None:
        for so, values, _anc, targets, _row in rec.emits:
            log.info("%s[%d] emit %s %r -> %s", self.component, self.task_id, so.stream, values, targets)
        for t in rec.acks:
            log.info("%s[%d] ack %r", self.component, self.task_id, t.values)
        for t, _ in rec.fails:
            log.info("%s[%d] fail %r", self.component, self.task_id, t.values)
