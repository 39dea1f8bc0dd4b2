"""complete_topology: run a topology on fixed inputs until every input tree is settled."""

from __future__ import annotations

import copy
from typing import Any

from squall.api.components import Spout
from squall.api.topology import ComponentSpec, StormTopology
from squall.engine.cluster import LocalCluster


class FixedTupleSpout(Spout):
    """Emits each given tuple once, with its position in the list as msg id; task i of n gets
    tuples i, i+n, i+2n, ... Records what was acked and failed, in the driver, where the result
    reads it."""

    DRIVER_BOUND = True

    def __init__(self, tuples: list[list], streams: dict | None = None, stream: str = "default"):
        self.tuples = [list(t) for t in tuples]
        self.streams = streams or {}
        self.stream = stream
        self.acked: list[Any] = []
        self.failed: list[Any] = []

    def __deepcopy__(self, memo: dict) -> FixedTupleSpout:
        return copy.copy(self)  # a task's own cursor; the record of acks and fails is shared

    def declare_output_fields(self, declarer: Any) -> None:
        for name, decl in self.streams.items():
            declarer.declare(list(decl.fields), stream=name, direct=decl.direct)

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self._collector = collector
        self._pos = context.this_task_index
        self._step = len(context.component_tasks(context.this_component_id))

    def next_tuple(self) -> None:
        if self._pos < len(self.tuples):
            pos = self._pos
            self._pos += self._step
            self._collector.emit(self.tuples[pos], msg_id=pos, stream=self.stream)

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)

    @property
    def exhausted(self) -> bool:
        return len(self.acked) + len(self.failed) >= len(self.tuples)


class CompleteTopologyResult:
    def __init__(self, captured: dict[str, dict[str, dict[int, list]]], spouts: dict[str, FixedTupleSpout],
                 stats: dict, errors: list):
        self._captured = captured
        self._spouts = spouts
        self.stats = stats
        self.errors = errors

    def emitted(self, component: str, stream: str = "default") -> list[list]:
        """What `component` emitted on `stream`: task by task (in task order), each in emit order."""
        per_task = self._captured.get(component, {}).get(stream, {})
        return [v for task in sorted(per_task) for v in per_task[task]]

    def acked(self, spout: str) -> list[Any]:
        return sorted(self._spouts[spout].acked)

    def failed(self, spout: str) -> list[Any]:
        return sorted(self._spouts[spout].failed)


def complete_topology(topology: StormTopology, mocked_sources: dict[str, list[list]] | None = None,
                      conf: dict | None = None, engine: str = "local", spark: Any = None,
                      max_sim_secs: float = 3600) -> CompleteTopologyResult:
    """Replace each mocked spout by a FixedTupleSpout of its tuples, run in simulated time until
    every mocked tuple is acked or failed, and return what every component emitted."""
    mocked_sources = mocked_sources or {}
    specs: list[ComponentSpec] = []
    fixed: dict[str, FixedTupleSpout] = {}
    for cid, spec in topology.specs.items():
        spec = copy.copy(spec)
        if cid in mocked_sources:
            if not spec.is_spout:
                raise ValueError(f"mocked_sources names {cid!r}, which is a bolt, not a spout")
            spec.obj = fixed[cid] = FixedTupleSpout(mocked_sources[cid], dict(spec.streams))
        specs.append(spec)
    unknown = set(mocked_sources) - set(topology.specs)
    if unknown:
        raise ValueError(f"mocked_sources names unknown spout(s) {sorted(unknown)}; spouts: {topology.spouts}")
    topo = StormTopology(specs)
    conf = dict(conf or {})
    timeout = float(conf.get("topology.message.timeout.secs", 30))
    with LocalCluster(engine=engine, spark=spark, simulated_time=True, capture=True, stepped=True) as cluster:
        cluster.submit_topology("complete-topology", conf, topo)
        waited = 0.0
        cluster.wait_idle()
        while not all(s.exhausted for s in fixed.values()):
            if waited > max_sim_secs:
                raise TimeoutError(
                    f"complete_topology: mocked tuples still pending after {max_sim_secs}s of simulated time"
                )
            cluster.advance_time(timeout)
            waited += timeout
        coord = cluster.coordinator("complete-topology")
        return CompleteTopologyResult(coord.captured, fixed, coord.stats_dict(), list(coord.errors))
