"""Tick tuples: what a bolt with `topology.tick.tuple.freq.secs` receives every so often.

As in Storm, a tick comes from the system component (`__system`, task -1) on the `__tick`
stream, with one value: the frequency in seconds. Ticks are not tracked (no tuple tree):
acking or failing one is allowed and does nothing.
"""

from __future__ import annotations

from typing import Any

SYSTEM_COMPONENT_ID = "__system"
SYSTEM_TASK_ID = -1
TICK_STREAM_ID = "__tick"
TICK_FIELDS = ("rate_secs",)


def is_tick(t: Any) -> bool:
    """True for a tick tuple (Storm's TupleUtils.isTick)."""
    return t.source_component == SYSTEM_COMPONENT_ID and t.source_stream == TICK_STREAM_ID
