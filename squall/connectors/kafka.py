"""Kafka connectors (confluent-kafka): `KafkaSpout` (storm-kafka-client's spout), `KafkaBolt`,
and the Trident spouts `OpaqueKafkaSpout` / `TransactionalKafkaSpout`."""

from __future__ import annotations

from squall.connectors.kafka_bolt import KafkaBolt
from squall.connectors.kafka_spout import FIELDS, KafkaSpout

__all__ = ["FIELDS", "KafkaBolt", "KafkaSpout"]
