"""The local engine: every bolt task in this process, run in topological order each wave."""

from __future__ import annotations

import copy

import numpy as np

from squall.api.config import component_conf
from squall.api.topology import StormTopology
from squall.engine.bolt_task import BoltTask
from squall.engine.sealing import seal_outputs
from squall.engine.task_kinds import bolt_task_class
from squall.engine.wave import WaveOutput
from squall.reliability.batch import TupleBatch
from squall.reliability.settled import sent_of


class LocalExecutor:
    default_wave_tuples = 2000
    engine = "local"

    def __init__(self, topology: StormTopology, conf: dict, capture: bool = False):
        self.topology = topology
        self.conf = conf
        self.tasks: dict[int, BoltTask] = {}
        for comp in topology.bolts_in_order:
            spec = topology.specs[comp]
            conf_c = component_conf(conf, spec)
            for i in range(spec.parallelism):
                self.tasks[topology.task_ids[comp][i]] = bolt_task_class(spec.obj)(
                    topology, comp, i, conf_c, copy.deepcopy(spec.obj), capture)
        self._order = [t for comp in topology.bolts_in_order for t in topology.task_ids[comp]]

    def start(self) -> None:
        """Nothing to start: each task prepares on first use (BoltTask.run), as on Spark, so a
        `prepare` that raises gives the same verdict on both engines."""

    def run_wave(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int, now: float | None = None) -> WaveOutput:
        inbox: dict[int, list[TupleBatch]] = {}
        for target, batch in spout_outputs:
            inbox.setdefault(target, []).append(batch)
        out = WaveOutput()
        out.sent.extend(sent_of(spout_outputs))  # matched with the Settled records (reliability/settled.py)
        roots: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        for task_id in self._order:
            batches = inbox.pop(task_id, None)
            if not batches:
                continue
            res = self.tasks[task_id].run(batches, wave, now)
            for target, b in seal_outputs(res, to_bytes=False):  # the same verdict as Spark on bad values
                inbox.setdefault(target, []).append(b)
            roots.extend(res.ack_roots)
            vals.extend(res.ack_vals)
            out.add_result(res)
        return out.finish(roots, vals)

    def stop(self) -> None:
        for task in self.tasks.values():
            try:
                task.cleanup()
            except Exception:  # noqa: BLE001 - cleanup errors must not hide the shutdown
                pass
