"""`squall.connectors.nats`: the NATS JetStream spout (implemented in `nats_jetstream`).

This module shares its last name with the `nats` package (nats-py); with absolute imports
(Python 3) `import nats` anywhere, this package included, still gets nats-py.
"""

from __future__ import annotations

from squall.connectors.nats_jetstream import JetStreamSpout, nats_servers

__all__ = ["JetStreamSpout", "nats_servers"]
