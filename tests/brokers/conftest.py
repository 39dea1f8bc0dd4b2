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
