"""Redis state provider (redis-py), as Storm's RedisKeyValueState: a hash of committed pairs per
namespace, a hash of prepared changes and the committed txid; commit is one MULTI/EXEC."""

from __future__ import annotations

from typing import Any

from squall.state.providers import Changes, StateProvider

_DELETED = b"\x00"  # a prepared delete (a prepared value is b"\x01" + the value)


class RedisProvider(StateProvider):
    """State in Redis at `url`: shared by every host that reaches the server."""

    NAME = "redis"
    HOST_LOCAL = False

    def __init__(self, config: dict | None = None):
        self.url = str((config or {}).get("url") or "")
        self._c: Any = None

    def _conn(self) -> Any:
        if self._c is None:
            import redis  # noqa: PLC0415 - only needed with this provider

            self._c = redis.Redis.from_url(self.url)
        return self._c

    @staticmethod
    def _keys(ns: str) -> tuple[str, str, str]:
        base = f"squall:state:{ns}"
        return base, base + ":prepared", base + ":txid"

    def load(self, namespace: str) -> tuple[dict[bytes, bytes], int]:
        data_k, prep_k, txid_k = self._keys(namespace)
        c = self._conn()
        c.delete(prep_k)
        data = c.hgetall(data_k)
        txid = c.get(txid_k)
        return dict(data), int(txid) if txid else 0

    def prepare(self, namespace: str, txid: int, changes: Changes) -> None:
        _, prep_k, _ = self._keys(namespace)
        pipe = self._conn().pipeline(transaction=True)
        pipe.delete(prep_k)
        mapping = {k: (_DELETED if v is None else b"\x01" + v) for k, v in changes.items()}
        mapping[b"$txid"] = str(txid).encode()
        pipe.hset(prep_k, mapping=mapping)
        pipe.execute()

    def commit(self, namespace: str, txid: int, changes: Changes) -> None:
        data_k, prep_k, txid_k = self._keys(namespace)
        puts = {k: v for k, v in changes.items() if v is not None}
        dels = [k for k, v in changes.items() if v is None]
        with self._conn().pipeline(transaction=True) as pipe:
            pipe.watch(txid_k)  # the txid check and the writes are one transaction (EXEC fails if it moved)
            stored = pipe.get(txid_k)
            pipe.multi()
            if stored is None or int(stored) < txid:  # else an old checkpoint run again: see StateProvider
                if puts:
                    pipe.hset(data_k, mapping=puts)
                if dels:
                    pipe.hdel(data_k, *dels)
                pipe.set(txid_k, txid)
            pipe.delete(prep_k)
            pipe.execute()

    def rollback(self, namespace: str) -> None:
        self._conn().delete(self._keys(namespace)[1])

    def close(self) -> None:
        if self._c is not None:
            self._c.close()
            self._c = None
