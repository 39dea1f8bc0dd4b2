"""When each ticking bolt is due a tick, on the coordinator's clock.

A bolt whose effective conf has `topology.tick.tuple.freq.secs` gets a tick every `secs`
seconds of topology time, the first `secs` after submit. Work runs in waves, so a tick is
delivered in the first wave that starts at or after its due time (every task of the bolt gets
it, before that wave's other inputs). A wave never carries two ticks for one bolt: when a wave
starts after several due times (a wave longer than `secs`), they are delivered as one tick and
the next is due at the first multiple of `secs` after now, as Storm's timer, which schedules the
next tick from the last. Under simulated time `advance_time` stops at every due time, so each
due time gets its own tick.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from squall.api.components import InvalidTopologyException
from squall.api.config import Config, component_conf
from squall.api.ticks import SYSTEM_COMPONENT_ID, SYSTEM_TASK_ID, TICK_FIELDS, TICK_STREAM_ID
from squall.api.topology import StormTopology
from squall.reliability.batch import TupleBatch

KEEP_DELIVERIES = 1000


@dataclass
class _Ticking:
    component: str
    secs: float
    tasks: list[int]
    due: float


@dataclass(frozen=True)
class TickDelivery:
    """One delivered tick: when it was due and the wave (and its start time) that carried it."""

    component: str
    due: float
    wave: int
    at: float


def tick_secs(component: str, conf: dict) -> float | None:
    """The component's tick frequency from its effective conf, checked (None: no ticks)."""
    secs = conf.get(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS)
    if secs is None:
        return None
    if isinstance(secs, bool) or not isinstance(secs, (int, float)) or not math.isfinite(secs) or secs <= 0:
        raise InvalidTopologyException(
            f"bolt {component!r}: {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS} must be a positive number of "
            f"seconds, got {secs!r}; leave it unset (None) for no ticks"
        )
    return float(secs)


def tick_batch(secs: float) -> TupleBatch:
    """One untracked tick tuple, as the system component sends it."""
    value = int(secs) if float(secs).is_integer() else secs
    return TupleBatch(SYSTEM_COMPONENT_ID, TICK_STREAM_ID, TICK_FIELDS, SYSTEM_TASK_ID, [[value]])


class TickSchedule:
    """The ticking bolts of a topology and when each is next due."""

    def __init__(self, topology: StormTopology, conf: dict, start: float):
        self.entries: list[_Ticking] = []
        for comp in topology.bolts_in_order:
            secs = self._secs(comp, component_conf(conf, topology.specs[comp]))
            if secs is not None:
                self.entries.append(_Ticking(comp, secs, list(topology.task_ids[comp]), start + secs))
        self.delivered: deque[TickDelivery] = deque(maxlen=KEEP_DELIVERIES)  # recent ones, to inspect

    def _secs(self, component: str, conf: dict) -> float | None:
        return tick_secs(component, conf)

    def _batch(self, e: _Ticking) -> TupleBatch:
        return tick_batch(e.secs)

    def next_due(self) -> float | None:
        return min((e.due for e in self.entries), default=None)

    def take_due(self, now: float, wave: int) -> list[tuple[int, TupleBatch]]:
        """This wave's ticks, as (target task, batch) like spout output; moves each due bolt on."""
        out: list[tuple[int, TupleBatch]] = []
        for e in self.entries:
            if now < e.due:
                continue
            self.delivered.append(TickDelivery(e.component, e.due, wave, now))
            e.due += e.secs * (math.floor((now - e.due) / e.secs) + 1)
            batch = self._batch(e)
            out.extend((t, batch) for t in e.tasks)
        return out
