"""`squall.connectors.rabbitmq`: the RabbitMQ spout (pika). `RabbitMQSpout`, `RabbitMQColumnSpout`
and `rabbitmq_url` are implemented in `spout`; `tags` tracks which delivery tags of a channel
are settled, so that a wave's acks go out as few frames."""

from __future__ import annotations

from squall.connectors.rabbitmq.spout import (
    ATTEMPTS_HEADER,
    MAX_PREFETCH,
    REASON_HEADER,
    RabbitMQColumnSpout,
    RabbitMQSpout,
    rabbitmq_url,
)
from squall.connectors.rabbitmq.spout import _int_header as _int_header  # the tests read it here

__all__ = ["ATTEMPTS_HEADER", "MAX_PREFETCH", "REASON_HEADER", "RabbitMQColumnSpout", "RabbitMQSpout", "rabbitmq_url"]
