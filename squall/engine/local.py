"""The local engine: every bolt task in this process, run in topological order each wave."""

from __future__ import annotations

import numpy as np

from squall.api.topology import StormTopology
from squall.engine.driver.wave import WaveOutput
from squall.engine.tasks.task_host import TaskHost
from squall.reliability.batch import TupleBatch
from squall.reliability.settled import sent_of


class LocalExecutor:
    default_wave_tuples = 2000
    engine = "local"

    def __init__(self, topology: StormTopology, conf: dict, capture: bool = False):
        self.topology = topology
        self.conf = conf
        self.host = TaskHost(topology, conf, capture)
        for tid in topology.task_component:
            if not topology.specs[topology.task_component[tid]].is_spout:
                self.host.task(tid)  # made at submit, as Storm's: a bolt that cannot be copied says so now
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
            step = self.host.step(task_id, batches, wave, now, to_bytes=False)  # sealed as on Spark
            for target, b in step.outputs:
                inbox.setdefault(target, []).append(b)
            if step.ack_roots is not None:
                roots.append(step.ack_roots)
                vals.append(step.ack_vals)
            out.add_result(step.result, step.counters)
        return out.finish(roots, vals)

    @property
    def tasks(self) -> dict:
        return self.host.tasks

    def stop(self) -> None:
        self.host.cleanup()
