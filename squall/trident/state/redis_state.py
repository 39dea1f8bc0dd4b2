"""Map states in Redis.

A state is one hash, ``{<prefix>}:state`` (field: the JSON of the key list, value: the JSON of
the stored value); the ``MetaStore`` is the hash ``{<prefix>}:meta``. The braces are a Redis
Cluster hash tag: both hashes live in one slot, so one ``MULTI``/``EXEC`` can write both.

Writes between ``begin_commit`` and ``commit`` are buffered in the state object and sent at
commit in one ``MULTI``/``EXEC`` (a transactional pipeline) together with the meta writes that
joined the commit: Redis applies all of it or, if the client dies before ``EXEC``, none.

(This module is ``redis_state``, not ``redis``, so ``import redis`` below is the PyPI client.)
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from squall.trident.state.commit import BufferedBackingMap, MetaStoreBase
from squall.trident.state.interfaces import check_kind
from squall.trident.state.maps import BackingMapStateFactory
from squall.trident.state.values import value_codec

__all__ = ["RedisMapState", "RedisMetaStore", "RedisStateFactory", "default_url", "redact_url"]

DEFAULT_URL = "redis://127.0.0.1:6379/0"
_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,200}")


def default_url() -> str:
    return os.environ.get("SQUALL_REDIS_URL") or DEFAULT_URL


def redact_url(url: str) -> str:
    """``url`` without its password."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rsplit("@", 1)[1]
        user = parts.username or ""
        return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))
    except ValueError:
        return "<unparsable url hidden>"


def _check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ValueError(f"invalid Redis key prefix {prefix!r}: use letters, digits and _ . : -")
    return prefix


def _keys(prefix: str) -> tuple[str, str]:
    return f"{{{prefix}}}:state", f"{{{prefix}}}:meta"


def _scope_name(url: str, prefix: str) -> str:
    return f"redis:{hashlib.sha256(url.encode()).hexdigest()[:16]}:{prefix}"


def _make_client(url: str, socket_timeout: float):
    try:
        import redis
    except ImportError as e:  # pragma: no cover - the connectors extra is missing
        raise ImportError("the Redis state needs redis-py: pip install 'squall[connectors]'") from e
    return redis.Redis.from_url(url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout)


class RedisMapState(BufferedBackingMap):
    """The Redis backing map of one state (one client)."""

    def __init__(self, url: str, kind: str, prefix: str = "squall", socket_timeout: float = 10.0) -> None:
        self.url = url
        self.kind = check_kind(kind)
        self.prefix = _check_prefix(prefix)
        self.socket_timeout = socket_timeout
        self.state_key, self.meta_key = _keys(prefix)
        super().__init__(_scope_name(url, prefix), *value_codec(kind))
        self._client_ = None

    @classmethod
    def factory(
        cls, url: str | None = None, kind: str = "opaque", prefix: str = "squall", socket_timeout: float = 10.0
    ) -> RedisStateFactory:
        return RedisStateFactory(url, kind, prefix, socket_timeout)

    @property
    def _client(self):
        if self._client_ is None:
            self._client_ = _make_client(self.url, self.socket_timeout)
        return self._client_

    def _read(self, enc_keys: list[str]) -> dict[str, Any]:
        vals = self._client.hmget(self.state_key, enc_keys)
        return {e: v for e, v in zip(enc_keys, vals) if v is not None}

    def _write(self, items: list[tuple[str, Any]], meta: dict[str, bytes]) -> None:
        pipe = self._client.pipeline(transaction=True)  # MULTI ... EXEC
        if items:
            pipe.hset(self.state_key, mapping=dict(items))
        if meta:
            pipe.hset(self.meta_key, mapping=meta)
        pipe.execute()

    def _close(self) -> None:
        if self._client_ is not None:
            self._client_.close()
            self._client_ = None

    def meta_store(self) -> RedisMetaStore:
        return RedisMetaStore(self.url, self.prefix, self.socket_timeout)

    def __repr__(self) -> str:
        return f"RedisMapState({redact_url(self.url)!r}, {self.kind!r}, prefix={self.prefix!r})"


class RedisMetaStore(MetaStoreBase):
    """The coordinator's records in the hash ``{<prefix>}:meta``."""

    def __init__(self, url: str, prefix: str = "squall", socket_timeout: float = 10.0) -> None:
        super().__init__(_scope_name(url, prefix))
        self.url = url
        self.prefix = _check_prefix(prefix)
        self.socket_timeout = socket_timeout
        self.meta_key = _keys(prefix)[1]
        self._client_ = None

    @property
    def _client(self):
        if self._client_ is None:
            self._client_ = _make_client(self.url, self.socket_timeout)
        return self._client_

    def _get_now(self, key: str) -> bytes | None:
        return self._client.hget(self.meta_key, key)

    def _put_now(self, items: dict[str, bytes]) -> None:
        self._client.hset(self.meta_key, mapping=items)

    def close(self) -> None:
        if self._client_ is not None:
            self._client_.close()
            self._client_ = None

    def __repr__(self) -> str:
        return f"RedisMetaStore({redact_url(self.url)!r}, prefix={self.prefix!r})"


@dataclass(frozen=True, repr=False)
class RedisStateFactory(BackingMapStateFactory):
    """Picklable configuration of Redis map states; ``url=None`` takes ``$SQUALL_REDIS_URL`` or
    ``redis://127.0.0.1:6379/0`` (resolved when the factory is made)."""

    url: str | None = None
    kind: str = "opaque"
    prefix: str = "squall"
    socket_timeout: float = 10.0

    def __post_init__(self) -> None:
        check_kind(self.kind)
        _check_prefix(self.prefix)
        if self.url is None:
            object.__setattr__(self, "url", default_url())

    def make_backing(self, conf: dict, partition_index: int, num_partitions: int) -> RedisMapState:
        return RedisMapState(self.url, self.kind, self.prefix, self.socket_timeout)

    def meta_store(self, conf: dict | None = None) -> RedisMetaStore:
        return RedisMetaStore(self.url, self.prefix, self.socket_timeout)

    def describe(self) -> str:
        return f"redis {self.kind} map state ({redact_url(self.url)}, prefix {self.prefix})"

    def __repr__(self) -> str:
        return f"RedisStateFactory({redact_url(self.url)!r}, {self.kind!r}, prefix={self.prefix!r})"

    def drop(self) -> None:
        """Deletes the state hash and the meta hash of this prefix."""
        client = _make_client(self.url, self.socket_timeout)
        try:
            client.delete(*_keys(self.prefix))
        finally:
            client.close()
