"""Checks that every bolt task's step started from the State its last step left.

A task's instance travels from wave to wave in its level's cached output, and Spark rebuilds a
lost cached block from its lineage. Should a step ever start from an older State than its
task's last completed step (a rebuild gone wrong), that step's updates to the bolt's state would
be lost without a trace: the tuples are acked all the same. Each task's report says which wave's
State it started from (0: a new instance); the driver, which sees the reports of completed jobs
in wave order, compares it with the last wave it saw the task step in, and records an error.
"""

from __future__ import annotations

from squall.observe.errors import ErrorRecord


class StateChain:
    """Per task id: the wave of its last completed step, as the driver saw it."""

    def __init__(self) -> None:
        self._last: dict[int, int] = {}

    def step(self, component: str, task: int, wave: int, state_from: int) -> ErrorRecord | None:
        """Task `task` stepped in `wave` from the State of wave `state_from`: an error if its last
        step was another wave."""
        last = self._last.get(task, 0)
        self._last[task] = wave
        if state_from == last:
            return None
        started = f"the State of wave {state_from}" if state_from else "a new instance"
        return ErrorRecord.from_exception(
            component, task, f"StateLost: its step of wave {wave} started from {started}, but its last step was "
            f"wave {last}: the bolt's state updates since may be lost (a Spark rebuild of its cached State "
            "went wrong; please report this with the Spark log)", kind="error")
