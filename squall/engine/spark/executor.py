"""The Spark engine's driver side: builds and runs one Spark job per wave.

Each topological level of bolts is one stage, with one partition per bolt task of that level.
Stage 1 runs over the previous wave's cached level-1 output (which holds each task's carried
instance), with this wave's spout output in files its closure names (on a local master; in the
closure itself on a cluster: engine/spark/spout_input.py). Every later stage reads one shuffle
(records keyed by destination partition) from the level before, unioned partition by
partition with its own cached output of the last wave (whose State it takes): a task's
instance never leaves its partition. Each level's output is persisted (it carries the
instances to the next wave). Batches travel pickled once, as bytes (engine/sealing.py). Ack
messages, folded per root in every partition, travel on with the data; with one acker the
driver collects the last level's rows and folds them; with more, they are shuffled by
`root % ackers` and folded there first. Only those rows, failures and small reports reach the
driver.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from squall.api.config import Config
from squall.api.topology import StormTopology
from squall.engine.fixed_parts import FIXED_DIR
from squall.engine.sealing import dumps
from squall.engine.spark import worker
from squall.engine.spark.checkpoints import Checkpoints, checkpoint_kind
from squall.engine.spark.fixed_files import FixedFiles
from squall.engine.spark.jvm import BroadcastRef, JvmHandles
from squall.engine.spark.logs import spark_log_note
from squall.engine.spark.records import Acks, Fails, Forward, Inputs, Report, Settles
from squall.engine.spark.session import topology_session, ui_url
from squall.engine.spark.spout_input import MAX_HELD_BYTES, SpoutInputs
from squall.engine.spark.state_chain import StateChain
from squall.engine.wave import WaveLost, WaveOutput
from squall.reliability.anchoring import combine
from squall.reliability.batch import TupleBatch
from squall.reliability.settled import Sent, sent_of, unsettled

log = logging.getLogger("squall")

CHECKPOINT_EVERY_WAVES = 25
CHECKPOINT_ALL_LEVELS = "spark.checkpoint.checkpointAllMarkedAncestors"  # a thread's local property
STATE_SHUFFLE_BYTES = 1 << 20  # a level's States bigger than this in all stay behind (worker.without_states)


class SparkExecutor:
    default_wave_tuples = 20000
    engine = "spark"

    def __init__(self, topology: StormTopology, conf: dict, spark: Any = None, capture: bool = False):
        from pyspark import cloudpickle  # noqa: PLC0415

        self.spark = topology_session(spark, conf, topology)
        self.sc = self.spark.sparkContext
        checkpoints = checkpoint_kind(conf, self.sc.master)
        if conf.get(Config.SQUALL_CHECKPOINT_DIR):
            self.sc.setCheckpointDir(str(conf[Config.SQUALL_CHECKPOINT_DIR]))
        self.topology = topology
        depth = max((topology.levels[c] for c in topology.bolts_in_order), default=0)
        levels = tuple(tuple((c, i) for c in topology.bolts_in_order if topology.levels[c] == lv
                             for i in range(topology.specs[c].parallelism)) for lv in range(1, depth + 1))
        loc = {topology.task_ids[c][i]: (lv + 1, p) for lv, parts in enumerate(levels)
               for p, (c, i) in enumerate(parts)}
        self.ackers = max(1, int(conf.get("topology.acker.executors", 1) or 1))
        self.layout = worker.Layout(levels, loc, self.ackers)
        if depth > len(worker.LEVEL_PARTITIONERS):
            raise ValueError(f"topologies deeper than {len(worker.LEVEL_PARTITIONERS)} levels are not supported")
        self.uid = uuid.uuid4().hex
        self._inputs = SpoutInputs(self.sc.master)
        # fixed attributes a few waves old go to files there (engine/fixed_parts.spill), on a local master
        self._fixed_files = FixedFiles(os.path.dirname(self._inputs.dir) if self._inputs.dir else None)
        if self._fixed_files.dir is not None:
            conf = {**conf, FIXED_DIR: self._fixed_files.dir}
        self.checkpoints = Checkpoints(self.sc, checkpoints)
        self._blob = self.sc.broadcast(cloudpickle.dumps((topology.without_spout_instances(), dict(conf), self.layout,
                                                          capture)))
        self._jvm = JvmHandles(self.sc, self._blob)
        self._blob_ref = BroadcastRef(self._blob)
        # per level: the persisted output (it carries the instances) of the last wave submitted,
        # which the next wave builds on, and of the last wave whose job succeeded
        self._state: list[Any] = []
        self._good: list[Any] = []
        self._built = 0
        self._pool: ThreadPoolExecutor | None = None
        # per task: its State's size after its last report; a level whose States are big in all
        # filters them out (a Python pass) before its output is shuffled or collected
        self._state_bytes: dict[tuple[int, int], int] = {}
        self._chain = StateChain()  # each task's step starts from the State its last one left
        self.waves = 0
        self.ui_url = ui_url(self.sc)

    @property
    def partitions(self) -> int:
        return sum(len(parts) for parts in self.layout.levels)

    def start(self) -> None:
        pass

    def run_wave(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int, now: float | None = None) -> WaveOutput:
        return self.submit_wave(spout_outputs, wave, now).result()

    def submit_wave(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int,
                    now: float | None = None) -> SubmittedWave:
        """Build the wave's job on the state of the last wave submitted and start it; its
        `result()` waits for it. Jobs may run at once: a task of this wave takes its State from
        the previous wave's cached output, so Spark runs it once that is there. A stage two
        waves' jobs need is run once, by whichever asks first; an earlier wave's step run inside
        a later job (a lost executor's cache, rebuilt from lineage) only rebuilds State: a level
        takes its own wave's records alone (worker.this_wave)."""
        if self.layout.depth == 0:
            return SubmittedWave(self, wave, [], None)
        outs, checkpoint = self._build(spout_outputs, wave, now)
        self._state = outs
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="squall-wave")
        job = self._pool.submit(self._run_job, outs, wave, checkpoint)
        return SubmittedWave(self, wave, outs, job, self._built if checkpoint else None, sent_of(spout_outputs),
                             self._built)

    def _build(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int,
               now: float | None) -> tuple[list[Any], bool]:
        """The wave's RDDs, one per level, and whether they are checkpointed."""
        from pyspark.core.rdd import Partitioner  # noqa: PLC0415
        layout = self.layout
        sc = self.sc
        width1 = layout.width(1)
        # Spout output goes to stage 1 (engine/spark/spout_input.py): level-1 tasks get it as
        # input, later levels get it forwarded through level 1.
        per_part: dict[int, dict[tuple[int, int], list]] = {}
        for target, batch in spout_outputs:
            lv, p = layout.loc[target]
            per_part.setdefault(p if lv == 1 else p % width1, {}).setdefault((lv, p), []).append(dumps(batch))
        spout_in = {p1: [Inputs(wave, b) if lv == 1 else Forward(wave, lv, p, b) for (lv, p), b in dests.items()]
                    for p1, dests in per_part.items()}
        prev = self._state
        outs = []
        self._built += 1
        carried = self._inputs.carry(self._built, spout_in)
        checkpoint = self._built % CHECKPOINT_EVERY_WAVES == 0 or self._inputs.bytes_since_checkpoint > MAX_HELD_BYTES
        if checkpoint:
            self._inputs.checkpointing()
            # Every level's checkpoint written by this wave's job: by default Spark writes only the
            # last marked RDD of a lineage, and the earlier levels' waited for the next job (the
            # spout input they need until then would be cut too soon). A property of the building
            # thread, read when an RDD is made; once set it stays.
            sc.setLocalProperty(CHECKPOINT_ALL_LEVELS, "true")
        for level in range(1, layout.depth + 1):
            fn = worker.run_level(self.uid, self._blob_ref, wave, level, carried if level == 1 else None, now)
            if level == 1:
                base = prev[0]._jrdd if prev else sc.parallelize([], width1)._jrdd
                out = _raw(sc, self._jvm.map_partitions(base, fn))
            else:
                before = outs[-1]
                if self._level_state_bytes(level - 1) > STATE_SHUFFLE_BYTES:  # leave its big States behind
                    before = before.mapPartitions(worker.without_states)
                    before._bypass_serializer = True
                part_fn = worker.LEVEL_PARTITIONERS[level - 1]
                shuffled = self._jvm.shuffle(before._jrdd, layout.width(level), part_fn)
                if prev:  # the same partitioner on both sides: a narrow, partition-by-partition union; the
                    # level takes its State from the cached side and leaves the rest (records carry their wave)
                    shuffled = shuffled.union(prev[level - 1]._jrdd)
                out = _raw(sc, self._jvm.map_partitions(shuffled, fn, preserves_partitioning=True))
                out.partitioner = Partitioner(layout.width(level), part_fn)
            # its step writes bytes keyed for the shuffle (worker.keyed_for_shuffle): read as they are
            out.is_cached = True  # RDD.persist(), with the storage level looked up once
            out._jrdd.persist(self._jvm.memory_only)
            if checkpoint:
                self.checkpoints.mark(out)  # cut the lineage now and then; from the cache, after the job
            outs.append(out)
        return outs, checkpoint

    def _run_job(self, outs: list[Any], wave: int, checkpoint: bool = False) -> list[tuple]:
        """In a thread of the pool: the wave's job (a job's group is per thread)."""
        self.sc.setJobGroup(f"squall-{self.uid[:8]}", f"wave {wave}")
        return self._collect(outs[-1], len(outs), checkpoint)

    def _finished(self, job: SubmittedWave, rows: list[tuple] | None) -> WaveOutput | None:
        """A wave's job ended: with its rows it is the new good state; without (lost, or dropped
        because an earlier wave was lost) its output goes and the next wave builds on the last
        good state again. A job that ran but sent a batch nobody settled did not run whole: it
        is dropped so, and raises WaveLost (reliability/settled.py)."""
        out, steps = (None, []) if rows is None else self._output(rows, job.sent)
        astray = None if out is None else unsettled(out.sent, out.settled)
        if out is None or astray is not None:
            for rdd in job.outs:
                rdd.unpersist(blocking=False)
            self._state = self._good
            if astray is not None:
                raise WaveLost(astray)
            return None
        for old in self._good:
            if not self.checkpoints.holds(old):  # a local checkpoint's blocks are later waves' lineage
                old.unpersist(blocking=False)
        self._good = job.outs
        for component, task, wave, state_from, fixed_token in steps:  # the coordinator records and logs the errors
            lost = self._chain.step(component, task, wave, state_from)
            if lost is not None:
                out.errors.append(lost)
            self._fixed_files.reported(job.build, component, task, fixed_token)
        if job.checkpointed is not None:  # its checkpoint is done: earlier builds never run again
            self._inputs.cut(job.checkpointed)
            self._fixed_files.cut(job.checkpointed)
            self.checkpoints.written_for(job.outs)
        self.waves += 1
        return out

    def _collect(self, last: Any, depth: int, checkpoint: bool = False) -> list[tuple]:
        """Run the wave's job: the last level's acks, failures and reports, at the driver. A
        wave whose RDDs are marked for a checkpoint runs as RDD.collect, which writes them once
        the job is done (collectAsync does not: JvmHandles.collect)."""
        if self.ackers > 1:
            return (last.mapPartitions(worker.to_ackers(self.ackers))
                    .partitionBy(self.ackers, worker.ACKER_PARTITIONER).mapPartitions(worker.acker_reduce)).collect()
        if self._level_state_bytes(depth) <= STATE_SHUFFLE_BYTES:
            # the last level's cached output as it is: no Python pass; its (small) States come along
            rows = _raw(self.sc, last._jrdd).collect() if checkpoint else self._jvm.collect(last._jrdd)
            return list(worker.to_driver(rows))
        # the driver folds the last level's rows itself: no acker stage (one less per wave)
        return last.mapPartitions(worker.without_states).mapPartitions(worker.to_driver).collect()

    def _level_state_bytes(self, level: int) -> int:
        return sum(b for (lv, _), b in self._state_bytes.items() if lv == level)

    def _output(self, rows: list[tuple], sent: list[Sent] | None = None) -> tuple[WaveOutput, list[tuple]]:
        """The wave's output, and its tasks' steps (component, task, wave, the wave of the State it
        started from, its fixed attributes' token) for the StateChain once the wave is kept."""
        out = WaveOutput()
        steps: list[tuple] = []
        roots: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        if sent:
            out.sent.extend(sent)
        for rec in rows:
            kind = type(rec)
            if kind is Acks:
                roots.append(rec.roots)
                vals.append(rec.xors)
            elif kind is Fails:
                out.fail_roots.extend(rec.roots)
                out.fail_reasons.extend(rec.reasons)
            elif kind is Settles:
                out.sent.extend(rec.sent)
                out.settled.extend(rec.settled)
            elif kind is Report:
                out.add_report(rec.component, rec.task, rec.counters, rec.errors, rec.captured, rec.metrics)
                steps.append((rec.component, rec.task, rec.wave, rec.state_from, rec.fixed_token))
                if rec.task in self.layout.loc:
                    self._state_bytes[self.layout.loc[rec.task]] = rec.state_bytes
        if roots:
            out.ack_roots, out.ack_vals = combine(np.concatenate(roots), np.concatenate(vals))
        return out, steps

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for out in {id(o): o for o in [*self._state, *self._good]}.values():
            out.unpersist(blocking=False)
        self._state = self._good = []
        self.checkpoints.close()
        self._inputs.close()
        self._fixed_files.close()
        try:
            self._blob.unpersist()
        except Exception:  # noqa: BLE001
            pass


class SubmittedWave:
    """A wave's job, running: `result()` waits for it (raises WaveLost when it failed);
    `drop()` waits for it and throws its result away (an earlier wave was lost)."""

    def __init__(self, executor: SparkExecutor, wave: int, outs: list[Any], job: Future | None,
                 checkpointed: int | None = None, sent: list[Sent] | None = None, build: int = 0):
        self.executor = executor
        self.build = build  # the executor's build number (checkpoints and files are cut by it)
        self.sent = sent  # its spout batches sent to tasks that settle whole (reliability/settled.py)
        self.wave = wave
        self.outs = outs
        self.job = job
        self.checkpointed = checkpointed  # the build number, when its outputs are checkpointed

    def result(self) -> WaveOutput:
        if self.job is None:
            return WaveOutput()
        try:
            rows = self.job.result()
        except Exception as e:  # noqa: BLE001 - Py4J wraps the job's failure
            self.executor._finished(self, None)
            raise WaveLost(_short_error(e) + spark_log_note()) from e
        return self.executor._finished(self, rows)

    def drop(self) -> None:
        if self.job is None:
            return
        try:
            self.job.result()
        except Exception:  # noqa: BLE001, S110 - its wave is run again from the last good state
            pass
        self.executor._finished(self, None)


def _raw(sc: Any, jrdd: Any) -> Any:
    """An RDD whose elements reach Python as the bytes they are (worker.records_of reads them)."""
    from pyspark import RDD  # noqa: PLC0415
    from pyspark.serializers import NoOpSerializer  # noqa: PLC0415

    return RDD(jrdd, sc, NoOpSerializer())


def _short_error(e: BaseException) -> str:
    """The useful line of a Py4J error: the Python exception if there is one, else Spark's reason."""
    text = str(e)
    py = [ln.strip() for ln in text.splitlines()
          if re.match(r"^\s*[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b:", ln) and "org.apache" not in ln
          and "py4j" not in ln]
    if py:
        return py[-1][:500]
    for line in text.splitlines():
        if "most recent failure" in line:
            reason = line.split("): ", 1)[-1] if "): " in line else line
            return reason.split(". Consider setting")[0].strip()[:500]
    for line in text.splitlines():
        if "Exception" in line or "Error" in line:
            return line.strip(" :")[:500]
    return text[:500]
