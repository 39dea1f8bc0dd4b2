"""Trident state: the values a map state stores, the map states (transactional, opaque,
non-transactional) over any backing map, and the stores: memory, SQLite (the embedded
default), PostgreSQL and Redis. Each store's ``XxxMapState.factory(..., kind)`` gives a
picklable ``StateFactory`` whose ``make_state(conf, partition_index, num_partitions)`` is the
map state of that kind and whose ``meta_store(conf)`` is the coordinator's ``MetaStore``.

The interfaces a state implements are in ``interfaces``; the buffered, atomic commit the
stores share is in ``commit``."""

from squall.trident.state.commit import BufferedBackingMap
from squall.trident.state.interfaces import (
    KINDS,
    IBackingMap,
    MapState,
    MetaStore,
    State,
    StateFactory,
    ValueUpdater,
)
from squall.trident.state.maps import (
    BackingMapStateFactory,
    NonTransactionalMap,
    OpaqueMap,
    TransactionalMap,
    build_map_state,
)
from squall.trident.state.memory import MemoryMapState, MemoryMetaStore, MemoryStateFactory
from squall.trident.state.postgres import PostgresMapState, PostgresMetaStore, PostgresStateFactory
from squall.trident.state.redis_state import RedisMapState, RedisMetaStore, RedisStateFactory
from squall.trident.state.sqlite import SQLiteMapState, SQLiteMetaStore, SQLiteStateFactory
from squall.trident.state.values import OpaqueValue, TransactionalValue

__all__ = [
    "KINDS",
    "BackingMapStateFactory",
    "BufferedBackingMap",
    "IBackingMap",
    "MapState",
    "MemoryMapState",
    "MemoryMetaStore",
    "MemoryStateFactory",
    "MetaStore",
    "NonTransactionalMap",
    "OpaqueMap",
    "OpaqueValue",
    "PostgresMapState",
    "PostgresMetaStore",
    "PostgresStateFactory",
    "RedisMapState",
    "RedisMetaStore",
    "RedisStateFactory",
    "SQLiteMapState",
    "SQLiteMetaStore",
    "SQLiteStateFactory",
    "State",
    "StateFactory",
    "TransactionalMap",
    "TransactionalValue",
    "ValueUpdater",
    "build_map_state",
]
