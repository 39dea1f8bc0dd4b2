"""When each stateful bolt checkpoints, on the coordinator's clock (Storm's CheckpointSpout role).

Every `topology.state.checkpoint.interval.ms` of topology time, every task of a stateful bolt
gets a PREPARE and a COMMIT tuple on the `$checkpoint` stream, delivered like ticks: at the
start of the first wave at or after the due time, before that wave's other inputs (so what a
task executed in earlier waves is committed), and under simulated time `advance_time` stops at
each due time. The engine knows only the component setting, not the bolt.
"""

from __future__ import annotations

from squall.api.checkpoint import (
    CHECKPOINT_COMPONENT_ID,
    CHECKPOINT_FIELDS,
    CHECKPOINT_STREAM_ID,
    CHECKPOINT_TASK_ID,
    CHECKPOINTED,
    COMMIT,
    PREPARE,
)
from squall.api.config import Config
from squall.engine.ticks import TickSchedule, _Ticking
from squall.reliability.batch import TupleBatch


class CheckpointSchedule(TickSchedule):
    """The stateful bolts of a topology and when each is next due a checkpoint."""

    txid = 0  # checkpoints sent so far (the value in the tuples' txid field)

    def _secs(self, component: str, conf: dict) -> float | None:
        if not conf.get(CHECKPOINTED):
            return None
        return float(conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL]) / 1000  # checked at submit

    def _batch(self, e: _Ticking) -> TupleBatch:
        self.txid += 1
        return TupleBatch(CHECKPOINT_COMPONENT_ID, CHECKPOINT_STREAM_ID, CHECKPOINT_FIELDS, CHECKPOINT_TASK_ID,
                          [[self.txid, PREPARE], [self.txid, COMMIT]])
