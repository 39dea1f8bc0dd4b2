"""`squall.connectors.nats`: the NATS JetStream spout. `JetStreamSpout` is implemented in
`jetstream`, with `connect` (the connection, stream and consumer), `pulls` (the outstanding pull
requests), `acks` (acks confirmed by a flush) and `wire` (the lean path past nats-py's
per-message work).

This package shares its last name with the `nats` package (nats-py); with absolute imports
(Python 3) `import nats` anywhere, this package included, still gets nats-py.
"""

from __future__ import annotations

from squall.connectors.column_spout import ColumnSpoutMixin
from squall.connectors.nats.jetstream import JetStreamSpout, nats_servers

__all__ = ["JetStreamColumnSpout", "JetStreamSpout", "nats_servers"]


class JetStreamColumnSpout(ColumnSpoutMixin, JetStreamSpout):
    """JetStreamSpout for columnar topologies: what it has received goes out as one Arrow batch
    (column "value", utf8 or binary) per call, each message its own tree, acked, retried and
    dead-lettered as with JetStreamSpout (see squall.connectors.column_spout)."""
