"""TopologyContext: what a task knows about itself and the topology."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from squall.api.metrics import CounterMetric, HistogramMetric, TaskMetrics
from squall.api.rebinding import current_context
from squall.api.topology import StormTopology


class TopologyContext:
    def __init__(self, topology: StormTopology, component: str, task_index: int):
        self._topology = topology
        self.this_component_id = component
        self.this_task_index = task_index
        self.this_task_id = topology.task_ids[component][task_index]
        self.resources: dict[str, Any] = {}
        self.wave_time = 0.0  # squall's own: the topology clock at the current wave (secs; simulated or epoch)
        self.metrics = TaskMetrics(component)  # carried with the task; taken by the engine each wave

    def __reduce__(self) -> tuple:
        return (current_context, ())

    def component_tasks(self, component_id: str) -> list[int]:
        return list(self._topology.task_ids[component_id])

    def get_component_tasks(self, component_id: str) -> list[int]:
        return self.component_tasks(component_id)

    def component_id(self, task_id: int) -> str:
        return self._topology.task_component[task_id]

    def this_output_fields(self, stream: str = "default") -> list[str]:
        return list(self._topology.fields(self.this_component_id, stream))

    def component_output_fields(self, component_id: str, stream: str = "default") -> list[str]:
        return list(self._topology.fields(component_id, stream))

    def this_sources(self) -> list[tuple[str, str]]:
        return [(s.source, s.stream) for s in self._topology.specs[self.this_component_id].inputs]

    # -- user metrics: shown per component in the UI and in /metrics (squall_user_*) -------

    def register_counter(self, name: str) -> CounterMetric:
        """A counter summed over the component's tasks and waves: `.inc(n=1)`."""
        return self.metrics.counter(name)

    def register_gauge(self, name: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        """A gauge: `fn()` is read at the end of every wave the task runs in."""
        return self.metrics.gauge(name, fn)

    def register_histogram(self, name: str, buckets: Sequence[float] | None = None) -> HistogramMetric:
        """A histogram merged over the component's tasks: `.observe(v)`."""
        return self.metrics.histogram(name, buckets)
