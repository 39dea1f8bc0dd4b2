"""Exactly-once processing: Storm's Trident on squall (see ../shared/DESIGN.md, Exactly-once)."""

from squall.trident.drpc import DRPCExecutionException, LocalDRPC
from squall.trident.operations import (
    Aggregator,
    BaseAggregator,
    BaseFilter,
    BaseFunction,
    CombinerAggregator,
    Count,
    FilterNull,
    MapGet,
    QueryFunction,
    ReducerAggregator,
    StateUpdater,
    Sum,
    TridentCollector,
    TridentTuple,
)
from squall.trident.spouts import (
    FixedBatchSpout,
    JsonLinesFileSpout,
    NonTransactionalSpout,
    OpaqueTransactionalSpout,
    TransactionalSpout,
)
from squall.trident.state import (
    MapState,
    MemoryMapState,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    PostgresMapState,
    RedisMapState,
    SQLiteMapState,
    State,
    TransactionalMap,
    TransactionalValue,
)
from squall.trident.topology import GroupedStream, Stream, TridentState, TridentTopology, guarantee

__all__ = [
    "Aggregator", "BaseAggregator", "BaseFilter", "BaseFunction", "CombinerAggregator", "Count",
    "DRPCExecutionException", "FilterNull", "FixedBatchSpout", "LocalDRPC",
    "GroupedStream", "JsonLinesFileSpout", "MapGet", "MapState", "MemoryMapState", "NonTransactionalMap",
    "NonTransactionalSpout", "OpaqueMap", "OpaqueTransactionalSpout", "OpaqueValue", "PostgresMapState",
    "QueryFunction", "RedisMapState", "ReducerAggregator", "SQLiteMapState", "State", "StateUpdater", "Stream", "Sum",
    "TransactionalMap", "TransactionalSpout", "TransactionalValue", "TridentCollector", "TridentState",
    "TridentTopology", "TridentTuple", "guarantee",
]
