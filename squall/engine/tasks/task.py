"""What bolt and spout tasks share, in every engine: identity, output streams and routing,
error records and the result being built for the wave."""

from __future__ import annotations

from collections.abc import Sequence

from squall.api.context import TopologyContext
from squall.api.streams import StreamOut
from squall.api.topology import StormTopology
from squall.engine.tasks.task_result import TaskResult
from squall.observe.errors import ErrorRecord
from squall.routing.tuples import shuffle_counters, stream_routes, weigh_shuffles


def build_streams(topology: StormTopology, component: str, task_index: int) -> dict[str, StreamOut]:
    """Every declared output stream of one task, with the routes of its subscribers."""
    spec = topology.specs[component]
    streams: dict[str, StreamOut] = {}
    for i, (name, decl) in enumerate(sorted(spec.streams.items())):
        routes = stream_routes(topology, component, name, task_index)
        direct_tasks = {t for sub, r in routes if r is None for t in topology.task_ids[sub]}
        streams[name] = StreamOut(component, name, decl.fields, decl.direct, routes, direct_tasks, i)
    return streams


class TaskBase:
    """What bolt and spout tasks share: identity, error records, the result being built."""

    def __init__(self, topology: StormTopology, component: str, task_index: int, conf: dict, capture: bool):
        self.topology = topology
        self.component = component
        self.task_index = task_index
        self.task_id = topology.task_ids[component][task_index]
        self.conf = conf
        self.capture = capture
        self.debug = bool(conf.get("topology.debug"))
        self.context = TopologyContext(topology, component, task_index)
        self.streams = build_streams(topology, component, task_index)
        self._res: TaskResult | None = None
        self._late_errors: list[ErrorRecord] = []
        self.shuffle_weights: dict[int, float] | None = None  # target task -> weight in its shuffles (None: even)

    def _error(self, rec: ErrorRecord) -> None:
        if self._res is not None:
            self._res.errors.append(rec)
        else:
            self._late_errors.append(rec)

    def report_error(self, error: BaseException | str) -> None:
        self._error(ErrorRecord.from_exception(self.component, self.task_id, error, kind="reported"))

    def take_late_errors(self) -> list[ErrorRecord]:
        """Errors reported outside a wave (from open, ack, fail, a background thread)."""
        errors, self._late_errors = self._late_errors, []
        return errors

    def _new_result(self) -> TaskResult:
        res = TaskResult(self.component, self.task_id)
        res.errors.extend(self.take_late_errors())
        if self.capture:
            res.captured = {}
        return res

    @staticmethod
    def _capture(res: TaskResult, emits: Sequence[tuple]) -> None:
        cap = res.captured
        for e in emits:
            cap.setdefault(e[0].stream, []).append(e[1])

    def weigh(self, weights: dict[int, float] | None) -> None:
        """Load-aware shuffle: the task's shuffles weighed by target task from now on (None: evenly).
        An engine weighs a task at each of its steps with the weights of the wave it steps, so that a
        wave run again routes as it first ran."""
        if weights is not self.shuffle_weights and weights != self.shuffle_weights:
            self.shuffle_weights = weights
            weigh_shuffles(self.streams.values(), weights)

    def routing_state(self) -> tuple:
        """What a snapshot keeps of the task's routing: its shuffles' weights and positions."""
        return self.shuffle_weights, [c.i for c in shuffle_counters(self.streams.values())]

    def restore_routing(self, state: tuple) -> None:
        """The routing as `routing_state` had it: the same cycles, at the same positions."""
        weights, positions = state
        self.weigh(weights)
        for c, i in zip(shuffle_counters(self.streams.values()), positions):
            c.i = i
