"""What only the RabbitMQ spout does: its settings and password handling, and its attempt header.
The broker contract (acks, retries, dead letters, drops, kills) is in test_broker_contract.py.

Skipped when RabbitMQ is unreachable, failed instead when CI=true (tests/support/broker_services.py).
"""

from __future__ import annotations

import pytest

from squall.connectors.rabbitmq import ATTEMPTS_HEADER, RabbitMQSpout, _int_header, rabbitmq_url
from tests.support.broker_services import need_rabbitmq, unique
from tests.support.broker_topology import open_fails_without_showing

pika = pytest.importorskip("pika")


def test_settings_from_the_environment_and_passwords_never_shown(monkeypatch):
    for var in ("AMQP_URL", "RABBITMQ_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RABBITMQ_HOST", "10.1.2.3")
    monkeypatch.setenv("RABBITMQ_PORT", "5673")
    monkeypatch.setenv("RABBITMQ_USER", "alice")
    monkeypatch.setenv("RABBITMQ_PASSWORD", "pa/ss:wörd")
    monkeypatch.setenv("RABBITMQ_VHOST", "prod")
    url = rabbitmq_url().reveal()
    assert pika.URLParameters(url).credentials.password == "pa/ss:wörd"
    assert pika.URLParameters(url).host == "10.1.2.3" and pika.URLParameters(url).port == 5673
    assert pika.URLParameters(url).virtual_host == "prod"
    spout = RabbitMQSpout("q")
    assert spout.url == "amqp://alice:***@10.1.2.3:5673/prod"
    assert "pa" not in repr(spout.__dict__.get("_url")) and "ss" not in repr(spout)
    monkeypatch.setenv("AMQP_URL", "amqp://bob:hunter2@127.0.0.1:5672/%2F")
    assert rabbitmq_url().reveal() == "amqp://bob:hunter2@127.0.0.1:5672/%2F"
    assert rabbitmq_url("amqp://carol@h:1/v", password="s3cret").reveal() == "amqp://carol:s3cret@h:1/v"


def test_a_wrong_password_fails_at_open_without_showing_it(caplog):
    """The local RabbitMQ knows guest/guest: another password is refused by the broker itself."""
    need_rabbitmq()
    spout = RabbitMQSpout(unique("rmqpw"), "amqp://guest:Sup3r-S3cret-pw@127.0.0.1:5672/%2F")
    text = open_fails_without_showing(spout, "Sup3r-S3cret-pw", caplog)
    assert "amqp://guest:***@127.0.0.1:5672" in text
    assert "ProbableAuthenticationError" in text or "ACCESS_REFUSED" in text, text


def test_attempt_header_survives_odd_values():
    assert _int_header({ATTEMPTS_HEADER: "x"}, ATTEMPTS_HEADER) == 0
    assert _int_header({ATTEMPTS_HEADER: 3}, ATTEMPTS_HEADER) == 3
    assert _int_header({ATTEMPTS_HEADER: -2}, ATTEMPTS_HEADER) == 0
    assert _int_header({}, ATTEMPTS_HEADER) == 0
