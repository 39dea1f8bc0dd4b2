"""`squall.connectors.kafka`: the Kafka connectors (confluent-kafka). `KafkaSpout` (storm-kafka-client's
spout, in `spout`), `KafkaColumnSpout` (the same, emitting each poll as one Arrow batch for
columnar bolts, in `columns`), `KafkaBolt` (in `bolt`), and the Trident spouts
`OpaqueKafkaSpout` / `TransactionalKafkaSpout` (in `trident`); `offsets` is the commit offset
manager, `common` what they all share (brokers, keys and values, client errors)."""

from __future__ import annotations

from squall.connectors.kafka.bolt import KafkaBolt
from squall.connectors.kafka.columns import KafkaColumnSpout
from squall.connectors.kafka.spout import FIELDS, KafkaSpout
from squall.connectors.kafka.trident import OpaqueKafkaSpout, TransactionalKafkaSpout

__all__ = ["FIELDS", "KafkaBolt", "KafkaColumnSpout", "KafkaSpout", "OpaqueKafkaSpout", "TransactionalKafkaSpout"]
