"""A small request/reply service on the driver, for Trident parts that must reach it from a
task: DRPC results (`LocalDRPC`) and `MemoryMapState` on the Spark engine.

Why: on Spark a bolt task runs in an executor's Python worker, while a `LocalDRPC` and the
memory state's dict live in the driver. The service listens on a local TCP port with a random
authentication key (`multiprocessing.connection`, HMAC handshake); a task calls it with one
message and waits for the reply, so when the task's wave ends the driver already holds what
the task sent. A caller in the driver's own process skips the socket and calls the handler.
"""

from __future__ import annotations

import logging
import os
import pickle
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

log = logging.getLogger("squall.trident")

__all__ = ["ServiceAddress", "call", "register", "service_address"]

_HANDLERS: dict[str, Callable[..., Any]] = {}  # topic -> handler(*args), in the driver
_LOCK = threading.Lock()
_SERVER: tuple[Listener, ServiceAddress] | None = None
_CLIENTS: dict[tuple, Connection] = {}  # address -> a connection of this process
_CLIENT_LOCK = threading.Lock()


@dataclass(frozen=True)
class ServiceAddress:
    """Where the driver's service listens, and the process it runs in."""

    host: str
    port: int
    authkey: bytes
    pid: int

    def __repr__(self) -> str:  # never show the key
        return f"ServiceAddress({self.host}:{self.port}, pid {self.pid})"


def register(topic: str, handler: Callable[..., Any]) -> None:
    """Handle `call(addr, topic, *args)` in this (the driver's) process."""
    _HANDLERS[topic] = handler


def service_address(host: str | None = None) -> ServiceAddress:
    """The address of this process's service, started on first use (a daemon thread)."""
    global _SERVER
    with _LOCK:
        if _SERVER is None or _SERVER[1].pid != os.getpid():
            bind = host or os.environ.get("SQUALL_DRIVER_HOST", "127.0.0.1")
            key = secrets.token_bytes(32)
            listener = Listener((bind, 0), authkey=key)
            addr = ServiceAddress(bind, listener.address[1], key, os.getpid())
            threading.Thread(target=_accept, args=(listener,), name="squall-trident-service", daemon=True).start()
            _SERVER = (listener, addr)
        return _SERVER[1]


def _accept(listener: Listener) -> None:
    while True:
        try:
            conn = listener.accept()
        except OSError:  # closed
            return
        except Exception as e:  # noqa: BLE001 - a client that failed the handshake; keep serving
            log.warning("squall trident service: refused a connection (%s)", e)
            continue
        threading.Thread(target=_serve, args=(conn,), name="squall-trident-conn", daemon=True).start()


def _serve(conn: Connection) -> None:
    with conn:
        while True:
            try:
                raw = conn.recv_bytes()
            except (EOFError, OSError):
                return
            try:
                topic, args = pickle.loads(raw)
                reply = ("ok", _handle(topic, args))
            except Exception as e:  # noqa: BLE001 - sent back, raised in the caller
                reply = ("error", f"{type(e).__name__}: {e}")
            try:
                conn.send(reply)
            except (EOFError, OSError):
                return
            except Exception as e:  # noqa: BLE001 - a reply that does not pickle
                conn.send(("error", f"the reply does not pickle: {type(e).__name__}: {e}"))


def _handle(topic: str, args: tuple) -> Any:
    handler = _HANDLERS.get(topic)
    if handler is None:
        raise LookupError(f"the driver has no handler for {topic!r}")
    return handler(*args)


def call(addr: ServiceAddress, topic: str, *args: Any) -> Any:
    """Send one request to the driver's service and return its reply (raises its error)."""
    if addr.pid == os.getpid():
        return _handle(topic, args)
    key = (addr.host, addr.port, addr.pid)
    with _CLIENT_LOCK:  # one request at a time per connection
        conn = _CLIENTS.get(key)
        for attempt in (0, 1):
            try:
                if conn is None:
                    conn = _CLIENTS[key] = Client((addr.host, addr.port), authkey=addr.authkey)
                conn.send((topic, args))
                status, value = conn.recv()
                break
            except (EOFError, OSError) as e:
                _CLIENTS.pop(key, None)
                conn = None
                if attempt:
                    raise ConnectionError(f"cannot reach the squall driver at {addr!r} for {topic!r}: {e}") from e
    if status == "error":
        raise RuntimeError(f"the driver answered {topic!r} with {value}")
    return value
