"""Spark pipelines in: a topology as the `foreachBatch` sink of a Structured Streaming query.

`TopologySink` runs every row of every micro-batch through a Storm topology (per-row acks,
replays and dead letters); `TridentSink` runs each micro-batch as one Trident batch, txid = batch
id, for exactly-once state.
"""

from squall.spark.sink import TopologySink
from squall.spark.trident_sink import SparkBatchSpout, TridentSink

__all__ = ["SparkBatchSpout", "TopologySink", "TridentSink"]
