"""BaseStatefulBolt: what users subclass for state that survives restarts (Storm's
BaseStatefulBolt). The builder runs it inside a StatefulBoltExecutor (squall.state.executor)."""

from __future__ import annotations

from typing import Any

from squall.api.components import Bolt


class BaseStatefulBolt(Bolt):
    """A Bolt with a KeyValueState: `init_state(state)` is called after `prepare` with the last
    committed state of this task. Ack inputs as usual: the acks are held and sent only after the
    next checkpoint has committed the state changes they caused."""

    def _run_by(self, component_id: str) -> Bolt:
        from squall.state.executor import StatefulBoltExecutor  # noqa: PLC0415 - it builds on this module

        return StatefulBoltExecutor(self, component_id)  # an executor that checkpoints the state (as Storm)

    def init_state(self, state: Any) -> None:
        """Keep `state` (a squall.state.KeyValueState) for `execute` to read and write."""
