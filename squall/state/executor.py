"""StatefulBoltExecutor: runs a BaseStatefulBolt as a Bolt (Storm's StatefulBoltExecutor).

On `prepare` it opens the task's KeyValueState (namespace topology/component/task), drops what
a previous run prepared but did not commit (Storm's rollback at INITSTATE) and hands the
committed state to `init_state`. The coordinator sends every task of the bolt a PREPARE and a
COMMIT tuple on the `$checkpoint` stream at the first wave after each checkpoint interval of
topology time (squall.engine.driver.checkpoints). The bolt acks its inputs as any bolt; the task
computes their ack messages as usual but holds them (squall.reliability.held_acks, carried with
the task between waves) and sends them only after COMMIT, so a spout
tuple is acked only once the state changes it caused are committed. A failed PREPARE or COMMIT
rolls the state back to the last commit and fails the held inputs (their spouts replay them).

The checkpoint tuples arrive first in their wave, but the task runs PREPARE and COMMIT at the
end of it (`finish_wave`, after every other input of the wave): the commit then includes that
wave's inputs and their acks leave with the wave, instead of being held one wave more. Held
trees fill max spout pending, so a wave more of them shrank every wave the spouts could emit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from squall.api.checkpoint import CHECKPOINT_COMPONENT_ID, CHECKPOINTED, COMMIT, PREPARE, ROLLBACK
from squall.api.components import Bolt
from squall.api.config import Config
from squall.reliability.held_acks import HeldAcks
from squall.reliability.pending import FailReason
from squall.reliability.tuple import Tuple
from squall.state.config import checkpoint_secs, make_provider
from squall.state.kv import KeyValueState

if TYPE_CHECKING:
    from squall.state.bolt import BaseStatefulBolt


class StatefulBoltExecutor(Bolt):
    """The Bolt the builder runs in place of a BaseStatefulBolt; see the module docstring."""

    WRAPS = "bolt"  # where the user's bolt is (api/components.user_instance)
    _settles_inputs = False  # its acks wait for a checkpoint: an input acked in the wave is not yet settled

    def __init__(self, bolt: BaseStatefulBolt, component: str):
        self.bolt = bolt
        self.component = component
        self.state: KeyValueState | None = None
        self.held_acks = HeldAcks()  # the ack messages of inputs acked since the last commit (the task's flush)
        self._due: list[str] = []  # PREPARE / COMMIT received this wave, run at its end

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
        self.bolt.prepare(conf, context, collector)
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
        try:
            self.bolt.finish_wave()  # the bolt's own end-of-wave hook (squall's), if it has one
        finally:
            due, self._due = self._due, []
            for action in due:
                self._checkpoint(action)

    def execute(self, t: Tuple) -> None:  # noqa: A002
        if t._b.component == CHECKPOINT_COMPONENT_ID:
            action = t.values[1]
            if action in (PREPARE, COMMIT):
                self._due.append(action)  # after the wave's other inputs (module docstring)
            else:
                self._checkpoint(action)
            self._out.ack(t)
            return
        self.bolt.execute(t)

    # -- the $checkpoint stream ----------------------------------------------------------

    def _checkpoint(self, action: str) -> None:
        state = self.state
        try:
            if action == PREPARE:
                if state.dirty:
                    state.prepare_commit(state.txid + 1)
            elif action == COMMIT:
                if state.dirty:
                    state.commit(state.txid + 1)
                if len(self.held_acks):
                    self.held_acks.release()  # sent at this batch's flush
                    self._out.track_held(self.held_acks)
            elif action == ROLLBACK:
                self._rollback(FailReason("failed", self.component, self.context.this_task_id, "state rolled back"))
        except Exception as e:  # noqa: BLE001 - the store failed: back to the last commit, replay the inputs
            self._report(e, action)
            self._rollback(FailReason("error", self.component, self.context.this_task_id,
                                      f"checkpoint {action} failed: {type(e).__name__}: {e}"))

    def _report(self, e: Exception, action: str) -> None:
        self._out.report_error(
            f"stateful bolt {self.component!r} (task {self.context.this_task_id}): checkpoint {action} in the "
            f"{self.state.provider.NAME} state store failed ({type(e).__name__}: {e}); the state is rolled back to "
            f"txid {self.state.txid} and the inputs since then fail (their spouts replay them)")

    def _rollback(self, reason: FailReason) -> None:
        if len(self.held_acks):
            self.held_acks.fail_all(reason)
            self._out.track_held(self.held_acks)
        self.state.rollback()
