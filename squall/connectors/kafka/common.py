"""What the Kafka spout, bolt and Trident spouts share: where the brokers are, how a key or
value becomes bytes, and how a client error reads.

Brokers: the `bootstrap_servers` argument, else `KAFKA_BOOTSTRAP_SERVERS`, else
127.0.0.1:9092. Extra librdkafka settings (security, SASL, ...) go in `consumer_config` /
`producer_config`; values of keys that look secret are never shown.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from squall.connectors.settings import env_first

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
SECRET_KEYS = ("password", "secret", "token", "key.pem", "jaas")


def kafka_bootstrap(bootstrap_servers: str | list[str] | None) -> str:
    """The bootstrap servers, as librdkafka's comma-separated string."""
    if isinstance(bootstrap_servers, list | tuple):
        bootstrap_servers = ",".join(bootstrap_servers)
    return bootstrap_servers or env_first("KAFKA_BOOTSTRAP_SERVERS", default=DEFAULT_BOOTSTRAP)


def shown_config(conf: dict[str, Any]) -> dict[str, Any]:
    """`conf` with the values of secret-looking keys replaced, for logs and errors."""
    return {k: ("***" if any(s in k.lower() for s in SECRET_KEYS) else v) for k, v in conf.items()}


def to_bytes(value: Any) -> bytes | None:
    """A key or value as Kafka bytes: bytes as they are, str as UTF-8, None as None (a null
    key, or a tombstone value), anything else as JSON."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":"), default=str).encode("utf-8")


def decode_key(key: bytes | None) -> str | bytes | None:
    """A record key as emitted: UTF-8 text when it is text, else the raw bytes."""
    if key is None:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return bytes(key)


def kafka_error_text(err: Any) -> str:
    """A KafkaError (or any exception) as one line: "NAME: reason"."""
    name = getattr(err, "name", None)
    if callable(name):
        return f"{name()}: {err.str()}"
    return f"{type(err).__name__}: {err}"


def b64(data: bytes | None) -> str | None:
    """Bytes as base64 text (a dead letter's key and value in a JSON-lines file)."""
    return None if data is None else base64.b64encode(data).decode("ascii")
