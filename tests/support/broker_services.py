"""Reaching the brokers the connector tests run against: RabbitMQ, Redis and NATS JetStream on
this machine (URLs overridable with SQUALL_TEST_*_URL). A test whose broker is unreachable is
skipped, or failed when CI=true: CI must not pass by skipping.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from squall.connectors.settings import redact_url
from squall.trident.state.postgres import default_dsn

ROOT = Path(__file__).resolve().parents[2]
CI = os.environ.get("CI", "").strip().lower() == "true"

RABBITMQ_URL = os.environ.get("SQUALL_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
REDIS_URL = os.environ.get("SQUALL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
NATS_URL = os.environ.get("SQUALL_TEST_NATS_URL", "nats://127.0.0.1:4222")

_reachable: dict[str, str | None] = {}  # service -> None (reachable) or why not


def need_service(name: str, where: str, probe: Callable[[], None]) -> None:
    """Skip the test when the service is unreachable; fail it instead when CI=true."""
    if name not in _reachable:
        try:
            probe()
            _reachable[name] = None
        except Exception as e:  # noqa: BLE001
            _reachable[name] = f"{type(e).__name__}: {e}"
    why = _reachable[name]
    if why is None:
        return
    if CI:
        pytest.fail(f"{name} at {where} is required when CI=true, and it is unreachable: {why}", pytrace=False)
    pytest.skip(f"{name} is not reachable at {where} ({why}); start it to run this test (with CI=true a "
                f"missing {name} is a failure)")


def need_rabbitmq() -> str:
    def probe() -> None:
        import pika

        params = pika.URLParameters(RABBITMQ_URL)
        params.connection_attempts = 1
        params.socket_timeout = 2
        pika.BlockingConnection(params).close()

    need_service("RabbitMQ", redact_url(RABBITMQ_URL), probe)
    return RABBITMQ_URL


def need_postgres() -> str:
    """PostgreSQL at squall's default DSN (the PG* variables); the DSN."""
    def probe() -> None:
        import psycopg

        psycopg.connect(default_dsn(), connect_timeout=3).close()

    need_service("PostgreSQL", default_dsn(), probe)
    return default_dsn()


def need_redis() -> str:
    def probe() -> None:
        import redis

        r = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        r.ping()
        r.close()

    need_service("Redis", redact_url(REDIS_URL), probe)
    return REDIS_URL


def need_nats() -> str:
    def probe() -> None:
        async def check() -> None:
            import nats

            async def quiet(e: Exception) -> None:
                pass

            nc = await asyncio.wait_for(nats.connect(NATS_URL, connect_timeout=2, allow_reconnect=False,
                                                     max_reconnect_attempts=1, error_cb=quiet), 5)
            try:
                await nc.jetstream().account_info()  # JetStream enabled?
            finally:
                await nc.close()

        asyncio.run(check())

    need_service("NATS JetStream", redact_url(NATS_URL), probe)
    return NATS_URL


def unique(prefix: str) -> str:
    return f"squall-test-{prefix}-{uuid.uuid4().hex[:10]}"


def wait_until(predicate: Callable[[], bool], timeout: float, what: Callable[[], str] | str,
               progress: Callable[[], Any] | None = None) -> None:
    """Poll `predicate` until true; AssertionError saying what was still missing at the deadline.
    With `progress` (e.g. the acked count), the deadline is `timeout` seconds after the last change
    of its value: a loaded machine that is still getting work done is waited for, a stall is not."""
    deadline = time.monotonic() + timeout
    last = progress() if progress is not None else None
    while not predicate():
        if progress is not None:
            now = progress()
            if now != last:
                last, deadline = now, time.monotonic() + timeout
        if time.monotonic() > deadline:
            stalled = " with no progress" if progress is not None else ""
            raise AssertionError(f"not reached within {timeout}s{stalled}: {what() if callable(what) else what}")
        time.sleep(0.05)


def check_module_does_not_shadow(package: str, impl: str, package_attr: str, spout_class: str,
                                 spout_module: str | None = None) -> None:
    """squall/connectors/<package>/ shares its last name with a client library: importing
    either first, in a fresh interpreter, must still give the library (from site-packages) to
    `impl`, the module of ours that imports it; `spout_class` is the same from both (defined in
    `spout_module`, default `impl`)."""
    code = (f"import squall.connectors.{package} as c, squall.connectors.{impl} as s, {package};"
            f"import squall.connectors.{spout_module or impl} as d;"
            f"assert hasattr({package}, {package_attr!r}) and s.{package} is {package};"
            f"assert c.{spout_class} is d.{spout_class};"
            f"print({package}.__file__)")
    for order in (code, f"import {package}; " + code):
        res = subprocess.run([sys.executable, "-c", order], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert "site-packages" in res.stdout
