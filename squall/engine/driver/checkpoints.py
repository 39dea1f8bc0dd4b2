"""When each stateful bolt checkpoints, on the coordinator's clock (Storm's CheckpointSpout role).

Every `topology.state.checkpoint.interval.ms` of topology time, every task of a stateful bolt
gets a PREPARE and a COMMIT tuple on the `$checkpoint` stream, delivered like ticks: at the
start of the first wave at or after the due time, before that wave's other inputs (the task
runs them at the wave's end: squall.state.executor), and under simulated time `advance_time`
stops at each due time. The engine knows only the component setting, not the bolt.

A stateful bolt's inputs stay pending until a commit, so under a heavy load the held trees can
fill `topology.max.spout.pending` before the interval is up, and the spouts would stand still
until it is. When they fill a quarter of max pending, the coordinator asks for the checkpoint
early (`take_due(..., early=True)`): it is sent at once and the next is due one interval later.
Committing sooner than the interval changes nothing of what is guaranteed; it costs a commit.
"""

from __future__ import annotations

from collections.abc import Iterable

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
from squall.engine.driver.ticks import TickSchedule, _Ticking
from squall.reliability.batch import TupleBatch


class CheckpointSchedule(TickSchedule):
    """The stateful bolts of a topology and when each is next due a checkpoint."""

    txid = 0  # checkpoints sent so far (the value in the tuples' txid field)
    last_wave = 0  # the wave that carried the latest checkpoint
    early = 0  # checkpoints sent before their due time, because held trees filled max pending

    def take_due(self, now: float, wave: int, early: bool = False) -> list[tuple[int, TupleBatch]]:
        """As TickSchedule.take_due; `early`: every stateful bolt is due now."""
        if early:
            self.early += sum(e.due > now for e in self.entries)
            for e in self.entries:
                e.due = min(e.due, now)
        out = super().take_due(now, wave)
        if out:
            self.last_wave = wave
        return out

    def held_up(self, pending: int, running: Iterable[tuple[int, int]], max_pending: int | None,
                spout_tasks: int) -> bool:
        """Whether to checkpoint early: the trees pending beyond the waves still `running` ((wave,
        trees it started) each; the rest are mostly inputs held for a commit) fill a quarter of max
        pending over all spout tasks, and no checkpoint wave is still running (its commit is about
        to free them)."""
        room = int(max_pending or 0) * spout_tasks
        if not self.entries or room <= 0:
            return False
        held = pending
        for wave, trees in running:
            if wave == self.last_wave:
                return False
            held -= trees
        return held * 4 >= room

    def _secs(self, component: str, conf: dict) -> float | None:
        if not conf.get(CHECKPOINTED):
            return None
        return float(conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL]) / 1000  # checked at submit

    def _batch(self, e: _Ticking) -> TupleBatch:
        self.txid += 1
        return TupleBatch(CHECKPOINT_COMPONENT_ID, CHECKPOINT_STREAM_ID, CHECKPOINT_FIELDS, CHECKPOINT_TASK_ID,
                          [[self.txid, PREPARE], [self.txid, COMMIT]])
