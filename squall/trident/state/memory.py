"""An in-memory map state (Storm's ``MemoryMapState``), on every engine.

Every state made by one factory (all partitions, every copy of the factory, a copy unpickled in
the same process) reads and writes one dict in a module-level registry, so what a batch
committed can be read back (``factory.make_state().multi_get``, ``factory.items()``).

On the Spark engine the dict stays in the driver: the state task's factory carries the address
of the driver's service (``squall.trident.service``), and a state made in an executor reads
the keys of its batch with one request and sends the batch's writes with one request at
``commit`` (the driver applies them under the dict's lock). Limits: the data lives in the
driver's memory and ends with it (nothing survives a restart), and every batch costs a round
trip to the driver per state task; for big or durable state use SQLite, PostgreSQL or Redis.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from squall.trident.service import ServiceAddress, call, register, service_address
from squall.trident.state.commit import BufferedBackingMap, MetaStoreBase
from squall.trident.state.interfaces import check_kind
from squall.trident.state.maps import BackingMapStateFactory
from squall.trident.state.values import OpaqueValue, TransactionalValue

__all__ = ["MemoryMapState", "MemoryMetaStore", "MemoryStateFactory"]


class _MemoryDB:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.data: dict[str, Any] = {}
        self.meta: dict[str, bytes] = {}


_DBS: dict[str, _MemoryDB] = {}
_DBS_LOCK = threading.Lock()


def _db(db_id: str) -> _MemoryDB:
    with _DBS_LOCK:
        db = _DBS.get(db_id)
        if db is None:
            db = _DBS[db_id] = _MemoryDB()
        return db


def _scope_name(db_id: str) -> str:
    return f"memory:{db_id}"


class MemoryMapState(BufferedBackingMap):
    """The in-memory backing map of one state; values are kept as objects (not copied)."""

    def __init__(self, db_id: str) -> None:
        super().__init__(_scope_name(db_id))
        self.db_id = db_id
        self._db = _db(db_id)

    @classmethod
    def factory(cls, kind: str = "opaque", db_id: str | None = None) -> MemoryStateFactory:
        """A factory of ``kind`` states over a new dict (or the dict named ``db_id``)."""
        return MemoryStateFactory(kind, db_id or uuid.uuid4().hex)

    def _read(self, enc_keys: list[str]) -> dict[str, Any]:
        data = self._db.data
        with self._db.lock:
            return {e: data[e] for e in enc_keys if e in data}

    def _write(self, items: list[tuple[str, Any]], meta: dict[str, bytes]) -> None:
        with self._db.lock:
            self._db.data.update(items)
            self._db.meta.update(meta)

    def meta_store(self) -> MemoryMetaStore:
        return MemoryMetaStore(self.db_id)

    def __repr__(self) -> str:
        return f"MemoryMapState({self.db_id[:8]})"


class RemoteMemoryMapState(MemoryMapState):
    """A memory state made in another process than the driver's (a Spark executor): reads and
    the commit's writes go to the driver's dict, one request each."""

    def __init__(self, db_id: str, home: ServiceAddress) -> None:
        BufferedBackingMap.__init__(self, _scope_name(db_id))
        self.db_id = db_id
        self.home = home

    def _read(self, enc_keys: list[str]) -> dict[str, Any]:
        return call(self.home, "memory.read", self.db_id, enc_keys)

    def _write(self, items: list[tuple[str, Any]], meta: dict[str, bytes]) -> None:
        call(self.home, "memory.write", self.db_id, items, meta)

    def __repr__(self) -> str:
        return f"MemoryMapState({self.db_id[:8]} in the driver at {self.home!r})"


def _serve_read(db_id: str, enc_keys: list[str]) -> dict[str, Any]:
    return MemoryMapState(db_id)._read(enc_keys)


def _serve_write(db_id: str, items: list[tuple[str, Any]], meta: dict[str, bytes]) -> None:
    MemoryMapState(db_id)._write(items, meta)


register("memory.read", _serve_read)
register("memory.write", _serve_write)


class MemoryMetaStore(MetaStoreBase):
    def __init__(self, db_id: str) -> None:
        super().__init__(_scope_name(db_id))
        self._db = _db(db_id)

    def _get_now(self, key: str) -> bytes | None:
        with self._db.lock:
            return self._db.meta.get(key)

    def _put_now(self, items: dict[str, bytes]) -> None:
        with self._db.lock:
            self._db.meta.update(items)


def _plain(v: Any) -> Any:
    if isinstance(v, OpaqueValue):
        return v.curr
    if isinstance(v, TransactionalValue):
        return v.val
    return v


@dataclass(frozen=True)
class MemoryStateFactory(BackingMapStateFactory):
    """Picklable: only the kind, the registry id and (Spark) the driver's address travel."""

    kind: str
    db_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    home: ServiceAddress | None = None  # set for tasks that run outside the driver

    def __post_init__(self) -> None:
        check_kind(self.kind)

    def make_backing(self, conf: dict, partition_index: int, num_partitions: int) -> MemoryMapState:
        if self.home is not None and self.home.pid != os.getpid():
            return RemoteMemoryMapState(self.db_id, self.home)
        return MemoryMapState(self.db_id)

    def served_from_driver(self) -> MemoryStateFactory:
        """This factory for tasks in other processes: their states use the driver's dict."""
        return MemoryStateFactory(self.kind, self.db_id, service_address())

    def meta_store(self, conf: dict | None = None) -> MemoryMetaStore:
        return MemoryMetaStore(self.db_id)

    def describe(self) -> str:
        return f"memory {self.kind} map state (id {self.db_id[:8]})"

    def items(self) -> list[tuple[list, Any]]:
        """The committed ``(key, value)`` pairs, values as ``multi_get`` gives them outside a batch."""
        db = _db(self.db_id)
        with db.lock:
            pairs = list(db.data.items())
        return [(json.loads(k), _plain(v)) for k, v in pairs]

    def clear(self) -> None:
        """Forgets everything stored under this factory's id (states and meta)."""
        with _DBS_LOCK:
            _DBS.pop(self.db_id, None)
