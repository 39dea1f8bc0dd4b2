"""pystorm's components (what streamparse's Spout and Bolt are), as squall spouts and bolts.

A streamparse Spout is a squall Spout and a streamparse Bolt a squall Bolt: `initialize`
runs in `open`/`prepare`, `process`/`process_tick` in `execute`, and `emit`/`ack`/`fail` go to
the squall collector, so Storm's guarantees are squall's. Tuples are pystorm's namedtuple
`Tuple(id, component, stream, task, values)`; `id` is the squall input tuple itself.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, namedtuple
from collections.abc import Callable
from typing import Any

from squall.api.components import Bolt as SquallBolt
from squall.api.components import Spout as SquallSpout
from squall.api.ticks import is_tick as squall_is_tick
from squall.reliability.tuple import Tuple as SquallTuple
from squall.streamparse.specs import ComponentSpec, Stream

Tuple = namedtuple("Tuple", "id component stream task values")

_IDENTIFIER_RE = re.compile(r"\W|^(?=\d)")
_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
           "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL}


def _declare(declarer: Any, outputs: Any) -> None:
    """Declare `outputs` (field names for the default stream, and/or Streams)."""
    default: list[str] = []
    for out in outputs or []:
        if isinstance(out, Stream):
            declarer.declare(out.fields, stream=out.name, direct=out.direct)
        else:
            default.append(out)
    if default:
        declarer.declare(default)


class StormHandler(logging.StreamHandler):
    """pystorm's handler sent log records to the Storm worker; here they go to stderr."""

    def __init__(self, serializer: Any = None):
        super().__init__()


class Component:
    """What pystorm's Spout and Bolt share: identity, conf, logger, error reporting."""

    outputs: Any = None
    par: Any = 1
    config: dict | None = None
    exit_on_exception = True  # pystorm's; squall never exits: the failing input fails, the task goes on

    def __init__(self, *args: Any, **kwargs: Any):  # pystorm's (input_stream, output_stream, ...) are not used
        self.topology_name = self.task_id = self.component_name = self.debug = None
        self.storm_conf: dict | None = None
        self.context: dict | None = None
        self.logger: logging.Logger | None = None
        self.squall_context: Any = None

    @classmethod
    def spec(cls, *args: Any, **kwargs: Any) -> ComponentSpec:
        raise TypeError(f"Specifications should either be bolts or spouts. Given: {cls!r}")

    def declare_output_fields(self, declarer: Any) -> None:
        _declare(declarer, self.outputs)

    def _setup_component(self, conf: dict, context: Any, collector: Any) -> None:
        self._collector = collector
        self.squall_context = context
        self.topology_name = conf.get("topology.name", "")
        self.task_id = context.this_task_id
        self.component_name = context.this_component_id
        self.debug = bool(conf.get("topology.debug", False))
        self.storm_conf = conf
        self.context = self._context_dict(context)
        self.logger = logging.getLogger(f"squall.streamparse.{self.component_name}")

    @staticmethod
    def _context_dict(context: Any) -> dict:
        """What pystorm's context holds (Storm's handshake): task, component, their map, input fields."""
        topo = context._topology
        sources: dict[str, dict[str, list[str]]] = {}
        for source, stream in context.this_sources():
            sources.setdefault(source, {})[stream] = list(topo.fields(source, stream))
        return {"taskid": context.this_task_id, "componentid": context.this_component_id,
                "task->component": {str(t): c for t, c in topo.task_component.items()},
                "source->stream->fields": sources}

    def initialize(self, storm_conf: dict, context: dict) -> None:
        """Called once before the first tuple; override it (pystorm's)."""

    def log(self, message: Any, level: str | None = None) -> None:
        self.logger.log(_LEVELS.get(level or "info", logging.INFO), "%s", message)

    def raise_exception(self, exception: BaseException, tup: Any = None) -> None:
        """Report an error with its traceback (kept in `cluster.get_errors`); the task goes on."""
        self._collector.report_error(exception)

    def report_error(self, error: BaseException | str) -> None:
        self._collector.report_error(error)

    def report_metric(self, name: str, value: Any) -> None:
        self.logger.debug("metric %s = %r", name, value)


class Spout(Component, SquallSpout):
    """pystorm's Spout: `initialize`, `next_tuple`, `ack(tup_id)`, `fail(tup_id)`, `emit`."""

    @classmethod
    def spec(cls, name: str | None = None, par: Any = None, config: dict | None = None) -> ComponentSpec:
        """This spout in a Topology class; its outputs are the class's `outputs`."""
        return ComponentSpec(cls, name=name, par=par, config=config, outputs=cls.outputs)

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self._setup_component(conf, context, collector)
        self.initialize(conf, self.context)

    def next_tuple(self) -> None:
        raise NotImplementedError(f"spout {self.component_name!r}: implement next_tuple()")

    def emit(self, tup: Any, tup_id: Any = None, stream: str | None = None, direct_task: int | None = None,
             need_task_ids: bool = False) -> list[int] | None:
        """Emit `tup`; with a `tup_id` it is tracked and `ack`/`fail(tup_id)` tell its fate."""
        values, stream = list(tup), stream or "default"
        if direct_task is not None:
            self._collector.emit_direct(direct_task, values, msg_id=tup_id, stream=stream)
            tasks = [direct_task]
        else:
            tasks = self._collector.emit(values, msg_id=tup_id, stream=stream)
        return tasks if need_task_ids else None


class ReliableSpout(Spout):
    """pystorm's ReliableSpout: keeps what it emitted by `tup_id`; a failed tuple is emitted
    again, up to `max_fails` times, then acked (given up) with a log line."""

    max_fails = 3

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.failed_tuples: Counter = Counter()
        self.unacked_tuples: dict[Any, tuple] = {}

    def ack(self, tup_id: Any) -> None:
        self.failed_tuples.pop(tup_id, None)
        if self.unacked_tuples.pop(tup_id, None) is None:
            self.logger.error("Received ack for unknown tuple ID: %r", tup_id)

    def fail(self, tup_id: Any) -> None:
        saved = self.unacked_tuples.get(tup_id)
        if saved is None:
            self.logger.error("Received fail for unknown tuple ID: %r", tup_id)
            return
        tup, stream, direct_task, need_task_ids = saved
        if self.failed_tuples[tup_id] < self.max_fails:
            self.emit(tup, tup_id=tup_id, stream=stream, direct_task=direct_task, need_task_ids=need_task_ids)
            self.failed_tuples[tup_id] += 1
        else:
            self.logger.info("Acking tuple ID %r after it exceeded retry limit (%r)", tup_id, self.max_fails)
            self.ack(tup_id)

    def emit(self, tup: Any, tup_id: Any = None, stream: str | None = None, direct_task: int | None = None,
             need_task_ids: bool = False) -> list[int] | None:
        if tup_id is None:
            raise ValueError("You must provide a tuple ID when emitting with a ReliableSpout in order for the tuple "
                             "to be tracked.")
        self.unacked_tuples[tup_id] = (tup, stream, direct_task, need_task_ids)
        return super().emit(tup, tup_id=tup_id, stream=stream, direct_task=direct_task, need_task_ids=need_task_ids)


class Bolt(Component, SquallBolt):
    """pystorm's Bolt: `initialize`, `process(tup)`, `process_tick(tup)`, `emit`, `ack`, `fail`,
    with `auto_anchor`, `auto_ack` and `auto_fail` (all True by default)."""

    auto_anchor = True
    auto_ack = True
    auto_fail = True
    _ack_after_process = True  # pystorm's Bolt acks after process; its BatchingBolt acks per batch

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._current_tups: list[Tuple] = []
        self._value_types: dict[tuple[str, str], Callable[..., Any]] = {}

    @classmethod
    def spec(cls, name: str | None = None, inputs: Any = None, par: Any = None,
             config: dict | None = None) -> ComponentSpec:
        """This bolt in a Topology class; its outputs are the class's `outputs`."""
        return ComponentSpec(cls, name=name, inputs=inputs, par=par, config=config, outputs=cls.outputs)

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self._setup_component(conf, context, collector)
        self.initialize(conf, self.context)

    @staticmethod
    def is_tick(tup: Tuple) -> bool:
        return tup.component == "__system" and tup.stream == "__tick"

    def process(self, tup: Tuple) -> None:
        raise NotImplementedError(f"bolt {self.component_name!r}: implement process(tup)")

    def process_tick(self, tup: Tuple) -> None:
        """Tick tuples (topology.tick.tuple.freq.secs); ignored unless overridden."""

    def _wrap(self, t: SquallTuple) -> Tuple:
        """pystorm's Tuple for a squall input: values as a namedtuple of the source's fields."""
        key = (t.source_component, t.source_stream)
        make = self._value_types.get(key)
        if make is None:
            if squall_is_tick(t):
                make = tuple
            else:
                name = _IDENTIFIER_RE.sub("_", key[0].title()) + _IDENTIFIER_RE.sub("_", key[1].title()) + "Tuple"
                cls = namedtuple(name, t.fields, rename=True)
                make = lambda values, cls=cls: cls(*values)  # noqa: E731
            self._value_types[key] = make
        return Tuple(t, t.source_component, t.source_stream, t.source_task, make(t.values))

    def execute(self, t: SquallTuple) -> None:
        tup = self._wrap(t)
        self._current_tups = [tup]
        try:
            if squall_is_tick(t):
                self.process_tick(tup)
            else:
                self.process(tup)
        except Exception as e:
            if self.auto_fail:
                raise  # squall fails the input with the error (and records it); the task goes on
            self.raise_exception(e, tup)  # not auto_fail: reported; the tuple stays pending (fails by timeout)
            return
        finally:
            self._current_tups = []
        if self.auto_ack and self._ack_after_process and t._done == 0:
            self._collector.ack(t)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_value_types"] = {}  # made again on first use: namedtuple types built here
        return state

    @staticmethod
    def _input(tup: Any) -> SquallTuple:
        """A squall input from a pystorm Tuple or its id."""
        return tup.id if isinstance(tup, Tuple) else tup

    def emit(self, tup: Any, stream: str | None = None, anchors: list | None = None, direct_task: int | None = None,
             need_task_ids: bool = False) -> list[int] | None:
        """Emit `tup`, anchored to `anchors` (Tuples or ids) or, with auto_anchor, to the input."""
        if anchors is None:
            anchors = self._current_tups if self.auto_anchor else []
        anchor_list = [self._input(a) for a in anchors] or None
        values, stream = list(tup), stream or "default"
        if direct_task is not None:
            self._collector.emit_direct(direct_task, values, anchors=anchor_list, stream=stream)
            tasks = [direct_task]
        else:
            tasks = self._collector.emit(values, anchors=anchor_list, stream=stream)
        return tasks if need_task_ids else None

    def ack(self, tup: Any) -> None:
        self._collector.ack(self._input(tup))

    def fail(self, tup: Any) -> None:
        self._collector.fail(self._input(tup))
