"""`squall.connectors.redis`: the Redis Streams spout (implemented in `redis_streams`).

This module shares its last name with the `redis` package (redis-py); with absolute imports
(Python 3) `import redis` anywhere, this package included, still gets redis-py.
"""

from __future__ import annotations

from squall.connectors.redis_streams import RedisStreamSpout, redis_url

__all__ = ["RedisStreamSpout", "redis_url"]
