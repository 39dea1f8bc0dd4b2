"""The user-facing component base classes, named as in Storm's Java API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from squall.api.basic_bolt import BasicOutputCollector
    from squall.api.collectors import OutputCollector
    from squall.api.context import TopologyContext
    from squall.api.spout_collector import SpoutOutputCollector
    from squall.api.topology import OutputFieldsDeclarer
    from squall.reliability.pending import FailReason
    from squall.reliability.tuple import Tuple


class FailedException(Exception):
    """Raised from a BasicBolt's execute: the input tuple is failed, nothing is reported."""


class ReportedFailedException(FailedException):
    """Like FailedException, and the error is reported (counted and kept)."""


class InvalidTopologyException(Exception):
    """The topology cannot run as built; the message says which component and what to fix."""


class Component:
    """What spouts and bolts share: output declaration and a per-component configuration.

    The builder keeps the instance you pass to `set_spout`/`set_bolt` as a template: every task
    gets its own copy (deep-copied locally, pickled for Spark), so create connections, locks and
    files in `open`/`prepare`, not in `__init__`.

    `fixed_attributes` (bolts): names of attributes built once, in `__init__` or `prepare`, and
    only read after, like a lookup table or a model. On Spark a bolt's instance is carried from wave
    to wave by pickling it; a fixed attribute is pickled once and unpickled once per Python
    worker instead of every wave. Assigning a new object to one is fine (it is carried anew);
    changing one in place is not, and is reported when a check finds it
    (`squall.fixed.check.waves`). The local engine keeps instances live and only checks.
    """

    fixed_attributes: tuple[str, ...] = ()

    # How a topology runs a component of this kind: each kind of bolt built on api (windowed,
    # stateful, columnar) says it on its class, so the builder imports none of them.
    _bolt_kind: ClassVar[str | None] = None  # "bolt", "basic" or "columnar"; None: not run as a bolt itself
    _settles_inputs: ClassVar[bool] = False  # acks or fails every input in the wave it comes (no edge per row)

    def _run_by(self, component_id: str) -> Component:
        """What the topology runs for this component: itself, or an executor that wraps it (as
        Storm runs a windowed or stateful bolt)."""
        return self

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare each output stream's fields with `declarer.declare([...], stream=...)`."""

    def check_engine(self, engine: str, conf: dict) -> None:
        """Optional hook, called once in `submit_topology`, before anything runs, with the engine
        name ("local" or "spark") and the effective topology conf. Raise (with a message that says
        what to do) when this component cannot run there; do not start work or open connections."""

    def get_component_configuration(self) -> dict | None:
        """Settings for this component only, over the topology's conf (as in Storm). Read once,
        when the topology is created; `add_configuration` on the declarer overrides them."""
        return None


class Spout(Component):
    """A source of tuples. Runs on the driver; `ack`/`fail` report the fate of each tree.

    All of a spout's methods run on the coordinator's thread, between waves or while the wave
    asks for tuples, never concurrently with each other.
    """

    def open(self, conf: dict, context: TopologyContext, collector: SpoutOutputCollector) -> None: ...

    def next_tuple(self) -> None:
        """Emit zero or more tuples, and return promptly: the wave waits for it. Emitting nothing
        tells the coordinator this spout is idle for now."""

    def ack(self, msg_id: Any) -> None:
        """The tree of `msg_id` is fully processed."""

    def ack_batch(self, msg_ids: list) -> None:
        """Optional (squall's own): the trees of all of `msg_ids` are fully processed. The
        coordinator calls it once per spout task and wave, in place of `ack` for each, when a
        spout defines it: a spout that emits many tuples at once (`emit_batch`) can settle them
        at once too (one broker call, one counter update). This default acks each."""
        for m in msg_ids:
            self.ack(m)

    def fail(self, msg_id: Any, reason: FailReason | None = None) -> None:
        """The tree of `msg_id` failed or timed out: replay it (emit it again) if it should be.

        A `fail` that accepts a `reason` keyword (as this one does) receives a `FailReason`:
        `timeout`, `failed` (a bolt failed it), `error` (an execute raised) or `lost` (its wave's
        job died), with the component and task where known. A `fail(self, msg_id)` override
        is called without it, as in Storm."""

    def replay_key(self, msg_id: Any) -> Any:
        """Optional: what stays the same when this spout replays a tuple under a new msg id
        (Trident adds an attempt number). squall counts a tuple's lost waves by this key to
        isolate and dead-letter poison tuples. Must be hashable or have a stable repr; called
        on the coordinator, must not emit."""
        return msg_id

    def activate(self) -> None: ...

    def deactivate(self) -> None: ...

    def close(self) -> None: ...


class Bolt(Component):
    """A processing step. `execute` gets each input tuple; ack or fail every one of them."""

    _bolt_kind = "bolt"
    # Its task reports every input settled at the end of the wave: an input it still holds then
    # gets an edge of its own (reliability/bolt_trees.hold_pending), so none needs one per row sent.
    _settles_inputs = True

    def prepare(self, conf: dict, context: TopologyContext, collector: OutputCollector) -> None: ...

    def execute(self, tuple: Tuple) -> None:  # noqa: A002 - Storm's parameter name
        raise NotImplementedError(f"{type(self).__name__} must define execute(self, tuple)")

    def finish_wave(self) -> None:
        """Optional hook (squall's own): called once per wave after this task has executed every
        input it got in that wave, and only in waves where it got some. It may emit (unanchored,
        or anchored to tuples it holds), ack and fail held tuples, as in `execute`. It must not
        block waiting for more input: the wave waits for it. Trident ends a batch here."""

    def cleanup(self) -> None: ...


class BasicBolt(Component):
    """A bolt whose emits are anchored to the input and whose input is acked after execute."""

    _bolt_kind = "basic"
    _settles_inputs = True  # it acks each input when `execute` returns, or fails it: it cannot hold one

    def prepare(self, conf: dict, context: TopologyContext) -> None: ...

    def execute(self, tuple: Tuple, collector: BasicOutputCollector) -> None:  # noqa: A002
        raise NotImplementedError(f"{type(self).__name__} must define execute(self, tuple, collector)")

    def cleanup(self) -> None: ...


def user_instance(bolt: Any) -> Any:
    """The user's bolt inside squall's wrappers (a BasicBolt's executor, windowed and stateful
    executors): each wrapper names the attribute it keeps it in (`WRAPS`)."""
    while True:
        attr = getattr(type(bolt), "WRAPS", None)
        if attr is None:
            return bolt
        bolt = getattr(bolt, attr)
