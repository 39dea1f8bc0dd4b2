"""Kafka connectors (confluent-kafka): `KafkaSpout` (storm-kafka-client's spout), `KafkaColumnSpout`
(the same, emitting each poll as one Arrow batch for columnar bolts), `KafkaBolt`, and the
Trident spouts `OpaqueKafkaSpout` / `TransactionalKafkaSpout`."""

from __future__ import annotations

from squall.connectors.kafka_bolt import KafkaBolt
from squall.connectors.kafka_columns import KafkaColumnSpout
from squall.connectors.kafka_spout import FIELDS, KafkaSpout
from squall.connectors.kafka_trident import OpaqueKafkaSpout, TransactionalKafkaSpout

__all__ = ["FIELDS", "KafkaBolt", "KafkaColumnSpout", "KafkaSpout", "OpaqueKafkaSpout", "TransactionalKafkaSpout"]
