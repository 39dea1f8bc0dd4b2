"""`squall.connectors.redis`: the Redis Streams spout (implemented in `streams`).

This package shares its last name with the `redis` package (redis-py); with absolute imports
(Python 3) `import redis` anywhere, this package included, still gets redis-py.
"""

from __future__ import annotations

from squall.connectors.column_spout import ColumnSpoutMixin
from squall.connectors.redis.connection import redis_url
from squall.connectors.redis.streams import RedisStreamSpout

__all__ = ["RedisStreamColumnSpout", "RedisStreamSpout", "redis_url"]


class RedisStreamColumnSpout(ColumnSpoutMixin, RedisStreamSpout):
    """RedisStreamSpout for columnar topologies: what it has read goes out as one Arrow batch
    (column "value", utf8 or binary) per call, each entry its own tree, acked, retried and
    dead-lettered as with RedisStreamSpout (see squall.connectors.column_spout)."""
