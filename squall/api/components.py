"""The user-facing component base classes, named as in Storm's Java API."""

from __future__ import annotations

from typing import Any


class FailedException(Exception):
    """Raised from a BasicBolt's execute: the input tuple is failed, nothing is reported."""


class ReportedFailedException(FailedException):
    """Like FailedException, and the error is reported (counted and kept)."""


class InvalidTopologyException(Exception):
    """The topology cannot run as built; the message says which component and what to fix."""


class Component:
    """What spouts and bolts share: output declaration and a per-component configuration."""

    def declare_output_fields(self, declarer: Any) -> None:
        """Declare each output stream's fields with `declarer.declare([...], stream=...)`."""

    def get_component_configuration(self) -> dict | None:
        """Settings for this component only, over the topology's conf (as in Storm). Read once,
        when the topology is created; `add_configuration` on the declarer overrides them."""
        return None


class Spout(Component):
    """A source of tuples. Runs on the driver; `ack`/`fail` report the fate of each tree.

    `fail` may take a `reason` keyword argument: it then receives a `FailReason` that says
    whether the tree timed out, was failed by a bolt, or failed with an error, and where.
    """

    def open(self, conf: dict, context: Any, collector: Any) -> None: ...

    def next_tuple(self) -> None: ...

    def ack(self, msg_id: Any) -> None: ...

    def fail(self, msg_id: Any) -> None: ...

    def activate(self) -> None: ...

    def deactivate(self) -> None: ...

    def close(self) -> None: ...


class Bolt(Component):
    """A processing step. `execute` gets each input tuple; ack or fail every one of them."""

    def prepare(self, conf: dict, context: Any, collector: Any) -> None: ...

    def execute(self, tuple: Any) -> None:  # noqa: A002 - Storm's parameter name
        raise NotImplementedError(f"{type(self).__name__} must define execute(self, tuple)")

    def cleanup(self) -> None: ...


class BasicBolt(Component):
    """A bolt whose emits are anchored to the input and whose input is acked after execute."""

    def prepare(self, conf: dict, context: Any) -> None: ...

    def execute(self, tuple: Any, collector: Any) -> None:  # noqa: A002
        raise NotImplementedError(f"{type(self).__name__} must define execute(self, tuple, collector)")

    def cleanup(self) -> None: ...
