"""StatefulBoltExecutor: runs a BaseStatefulBolt as a Bolt (Storm's StatefulBoltExecutor).

On `prepare` it opens the task's KeyValueState (namespace topology/component/task), drops what
a previous run prepared but did not commit (Storm's rollback at INITSTATE) and hands the
committed state to `init_state`. The coordinator sends every task of the bolt a PREPARE and a
COMMIT tuple on the `$checkpoint` stream at the first wave after each checkpoint interval of
topology time (squall.engine.checkpoints). Acks the bolt gives its inputs are held (in a
HeldStore, as columns, carried with the task between waves) and sent only after COMMIT, so a spout
tuple is acked only once the state changes it caused are committed. A failed PREPARE or COMMIT
rolls the state back to the last commit and fails the held inputs (their spouts replay them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from squall.api.checkpoint import CHECKPOINT_COMPONENT_ID, CHECKPOINTED, COMMIT, PREPARE, ROLLBACK
from squall.api.components import Bolt
from squall.api.config import Config
from squall.api.ticks import SYSTEM_COMPONENT_ID
from squall.api.tuple import Tuple
from squall.reliability.held import PENDING, HeldStore
from squall.reliability.pending import FailReason
from squall.state.bolt import BaseStatefulBolt
from squall.state.config import checkpoint_secs, make_provider
from squall.state.kv import KeyValueState


class AckHoldingCollector:
    """The collector a stateful bolt gets: acks of inputs are held until the next commit;
    everything else goes to the task's collector."""

    def __init__(self, out: Any, executor: StatefulBoltExecutor):
        self._out = out
        self._executor = executor

    def emit(self, values: list, anchors: Any = None, stream: str = "default") -> list[int]:
        return self._out.emit(values, anchors, stream)

    def emit_direct(self, task: int, values: list, anchors: Any = None, stream: str = "default") -> None:
        self._out.emit_direct(task, values, anchors, stream)

    def ack(self, tuple: Tuple) -> None:  # noqa: A002
        if type(tuple) is Tuple and not tuple._done and tuple._b.component != SYSTEM_COMPONENT_ID:
            self._executor.store.add(tuple, 0, 0)  # the task's flush still adds the edges of its anchored emits
        else:
            self._out.ack(tuple)  # a tick, or a second ack (reported as such)

    def fail(self, tuple: Tuple) -> None:  # noqa: A002
        self._out.fail(tuple)

    def reset_timeout(self, tuple: Tuple) -> None:  # noqa: A002
        self._out.reset_timeout(tuple)

    def report_error(self, error: Any) -> None:
        self._out.report_error(error)


class StatefulBoltExecutor(Bolt):
    """The Bolt the builder runs in place of a BaseStatefulBolt; see the module docstring."""

    def __init__(self, bolt: BaseStatefulBolt, component: str):
        self.bolt = bolt
        self.component = component
        self.state: KeyValueState | None = None
        self.store = HeldStore()  # inputs the bolt acked since the last commit, as columns
        self.checkpoints = 0  # commits done by this task in this run (for tests and metrics)

    def declare_output_fields(self, declarer: Any) -> None:
        self.bolt.declare_output_fields(declarer)

    def get_component_configuration(self) -> dict | None:
        return {**(self.bolt.get_component_configuration() or {}), CHECKPOINTED: True}

    def check_engine(self, engine: str, conf: dict) -> None:
        """At submit: the checkpoint interval and the provider settings (no connection yet)."""
        checkpoint_secs(self.component, conf)
        make_provider(self.component, conf)
        self.bolt.check_engine(engine, conf)

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self._out = collector
        self.context = context
        name = conf.get(Config.TOPOLOGY_NAME) or "topology"
        state = KeyValueState(make_provider(self.component, conf),
                              f"{name}/{self.component}/{context.this_task_index}", self.component)
        self.bolt.prepare(conf, context, AckHoldingCollector(collector, self))
        state.init()  # INITSTATE
        self.state = state
        self.bolt.init_state(state)

    def cleanup(self) -> None:
        try:
            self.bolt.cleanup()
        finally:
            if self.state is not None:
                self.state.provider.close()

    def finish_wave(self) -> None:
        """End of the task's wave: the rows held this wave become columns, so the wave's input
        batches are not kept alive until the commit; then the bolt's own hook, if any."""
        self.store.consolidate()
        self.bolt.finish_wave()

    def execute(self, t: Tuple) -> None:  # noqa: A002
        if t._b.component == CHECKPOINT_COMPONENT_ID:
            self._checkpoint(t)
            return
        self.bolt.execute(t)

    # -- the $checkpoint stream ----------------------------------------------------------

    def _checkpoint(self, t: Tuple) -> None:
        action = t.values[1]
        state = self.state
        try:
            if action == PREPARE:
                if state.dirty:
                    state.prepare_commit(state.txid + 1)
            elif action == COMMIT:
                if state.dirty:
                    state.commit(state.txid + 1)
                self.checkpoints += 1
                rows = self._held_rows()
                if self.store.ack(rows):  # the ack messages are computed at this batch's flush
                    self.store.gone[rows] = True
                    self._out.track_held(self.store)
            elif action == ROLLBACK:
                self._rollback(FailReason("failed", self.component, self.context.this_task_id, "state rolled back"))
        except Exception as e:  # noqa: BLE001 - the store failed: back to the last commit, replay the inputs
            self._report(e, action)
            self._rollback(FailReason("error", self.component, self.context.this_task_id,
                                      f"checkpoint {action} failed: {type(e).__name__}: {e}"))
        self._out.ack(t)

    def _report(self, e: Exception, action: str) -> None:
        self._out.report_error(
            f"stateful bolt {self.component!r} (task {self.context.this_task_id}): checkpoint {action} in the "
            f"{self.state.provider.NAME} state store failed ({type(e).__name__}: {e}); the state is rolled back to "
            f"txid {self.state.txid} and the inputs since then fail (their spouts replay them)")

    def _held_rows(self) -> np.ndarray:
        self.store.consolidate()
        return np.flatnonzero(self.store.done == PENDING)

    def _rollback(self, reason: FailReason) -> None:
        if self.store.fail(self._held_rows(), reason):
            self._out.track_held(self.store)
        self.state.rollback()
