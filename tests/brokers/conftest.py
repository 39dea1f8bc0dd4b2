"""The admin adapter of one broker, for the per-broker test files (the contract suite has its
own fixture, parametrized over every broker)."""

from __future__ import annotations

import pytest

from tests.support.broker_admins import NatsAdmin, RedisAdmin


@pytest.fixture
def redis_admin():
    a = RedisAdmin()
    yield a
    a.close()


@pytest.fixture
def nats_admin():
    a = NatsAdmin()
    yield a
    a.close()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A Kafka-protocol broker for the session: SQUALL_KAFKA_BOOTSTRAP, else a Tansu of our own
    (stopped by its pid at the end)."""
    from tests.support.kafka_broker import KafkaBroker

    broker = KafkaBroker.start(tmp_path_factory.mktemp("kafka"))
    yield broker
    broker.stop()


@pytest.fixture
def kafka_admin(kafka_broker):
    from tests.support.kafka_admin import KafkaAdmin

    a = KafkaAdmin(kafka_broker)
    yield a
    a.close()
