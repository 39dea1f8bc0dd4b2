"""The Spark engine's driver side: builds and runs one Spark job per wave.

Partition p of every stage is bolt task p (tasks of all bolts, in topological order). Stage 1
runs over the previous wave's cached output (which holds each task's carried instance), with
this wave's spout output in its closure, and runs the level-1 bolts; each further level is
one shuffle (records keyed by destination partition) and runs that level's bolts, passing the
rest through. The last level's output is persisted: it carries the task instances to the next
wave. Its ack messages, folded per root in every partition, are shuffled by `root % ackers`
and folded again there; only those rows, failures and small reports reach the driver.
"""

from __future__ import annotations

import logging
import pickle
import re
import uuid
from typing import Any

import numpy as np

from squall.api.topology import StormTopology
from squall.engine.batch import TupleBatch
from squall.engine.spark import worker
from squall.engine.spark.session import get_or_create_session
from squall.engine.wave import TaskStats, WaveLost, WaveOutput

log = logging.getLogger("squall")

CHECKPOINT_EVERY_WAVES = 25


def strip_spouts(topology: StormTopology) -> StormTopology:
    """The topology as executors need it: routing and bolts, no spout instances (they stay on
    the driver and may hold things that cannot be pickled, like locks or connections)."""
    t = object.__new__(StormTopology)
    t.__dict__.update(topology.__dict__)
    t.specs = {}
    for cid, spec in topology.specs.items():
        if spec.is_spout:
            spec = type(spec)(spec.id, None, spec.parallelism, True, list(spec.inputs), dict(spec.conf),
                              dict(spec.streams))
        t.specs[cid] = spec
    return t


class SparkExecutor:
    default_wave_tuples = 20000

    def __init__(self, topology: StormTopology, conf: dict, spark: Any = None, capture: bool = False):
        from pyspark import cloudpickle  # noqa: PLC0415

        if spark is None or isinstance(spark, str):
            self.spark = get_or_create_session(spark, ui=bool(conf.get("squall.spark.ui", False)))
        else:
            self.spark = spark
        self.sc = self.spark.sparkContext
        self.topology = topology
        parts = tuple((c, i) for c in topology.bolts_in_order for i in range(topology.specs[c].parallelism))
        part_of_task = {topology.task_ids[c][i]: p for p, (c, i) in enumerate(parts)}
        levels = tuple(topology.levels[c] for c, _ in parts)
        self.ackers = max(1, int(conf.get("topology.acker.executors", 1) or 1))
        self.layout = worker.Layout(parts, levels, part_of_task, max(levels, default=0), self.ackers)
        self.uid = uuid.uuid4().hex
        full_conf = dict(conf)
        self._blob = self.sc.broadcast(cloudpickle.dumps((strip_spouts(topology), full_conf, self.layout, capture)))
        self._state = None  # the last wave's persisted output: carries the task instances
        self.waves = 0
        try:
            self.ui_url = self.sc.uiWebUrl
        except Exception:  # noqa: BLE001
            self.ui_url = None

    @property
    def partitions(self) -> int:
        return len(self.layout.parts)

    def start(self) -> None:
        pass

    def run_wave(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int) -> WaveOutput:
        P = self.partitions
        if P == 0:
            return WaveOutput()
        by_part: dict[int, list[TupleBatch]] = {}
        for target, batch in spout_outputs:
            by_part.setdefault(self.layout.part_of_task[target], []).append(batch)
        spout_in = {p: pickle.dumps(batches, protocol=pickle.HIGHEST_PROTOCOL) for p, batches in by_part.items()}
        sc = self.sc
        sc.setJobGroup(f"squall-{self.uid[:8]}", f"wave {wave}")
        prev = self._state
        if prev is None:
            prev = self._empty = getattr(self, "_empty", None) or sc.parallelize([], P)
        rdd = prev.mapPartitionsWithIndex(worker.run_level(self.uid, self._blob, wave, 1, spout_in))
        for level in range(2, self.layout.depth + 1):
            rdd = rdd.partitionBy(P, worker.identity).mapPartitionsWithIndex(
                worker.run_level(self.uid, self._blob, wave, level))
        rdd.persist()
        if (self.waves + 1) % CHECKPOINT_EVERY_WAVES == 0:
            rdd.checkpoint()  # cut the lineage now and then; written from the cache after the job
        acks = (rdd.mapPartitions(worker.to_ackers(self.ackers)).partitionBy(self.ackers, worker.identity)
                .mapPartitions(worker.acker_reduce))
        try:
            rows = acks.collect()
        except Exception as e:  # noqa: BLE001 - Py4J wraps the job's failure
            rdd.unpersist(blocking=False)
            raise WaveLost(_short_error(e)) from e
        if self._state is not None:
            self._state.unpersist(blocking=False)
        self._state = rdd
        self.waves += 1
        return self._output(rows)

    def _output(self, rows: list[tuple]) -> WaveOutput:
        out = WaveOutput()
        roots, vals = [], []
        for rec in rows:
            kind = rec[0]
            if kind == "ack":
                roots.append(rec[1])
                vals.append(rec[2])
            elif kind == "fail":
                out.fail_roots.extend(rec[1])
                out.fail_reasons.extend(rec[2])
            elif kind == "report":
                _, comp, task, (executed, acked, failed, emitted, secs), errors, captured = rec
                st = out.stats.setdefault(comp, TaskStats(comp))
                st.executed += executed
                st.acked += acked
                st.failed += failed
                st.emitted += emitted
                st.exec_secs += secs
                out.errors.extend(errors)
                if captured:
                    c = out.captured.setdefault(comp, {})
                    for stream, v in captured.items():
                        c.setdefault(stream, {}).setdefault(task, []).extend(v)
        if roots:
            out.ack_roots = np.concatenate(roots)
            out.ack_vals = np.concatenate(vals)
        return out

    def stop(self) -> None:
        if self._state is not None:
            self._state.unpersist(blocking=False)
            self._state = None
        try:
            self._blob.unpersist()
        except Exception:  # noqa: BLE001
            pass


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
