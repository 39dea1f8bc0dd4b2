"""Connecting to NATS for a spout: the servers and credentials from the spout's settings, a
first connection bounded in time (nats-py retries a first connection forever when reconnects
are unlimited, as a spout wants them once connected), and an immediate, clear failure when the
server refuses the credentials (trying again would not help). Then the stream and the durable
consumer the spout reads, made or updated to its settings."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import nats
import nats.js.errors

from squall.connectors.settings import Secret, describe_error

RECONNECT_WAIT_SECS = 0.5


async def connect(servers: Secret, name: str, timeout_secs: float, *, user: str | None = None,
                  password: Secret | None = None, token: Secret | None = None, creds: str | None = None,
                  error_cb: Callable[[Exception], Awaitable[None]] | None = None,
                  disconnected_cb: Callable[[], Awaitable[None]] | None = None,
                  reconnected_cb: Callable[[], Awaitable[None]] | None = None) -> Any:
    """A connected nats-py client that reconnects forever; ConnectionError if no server answers
    within 2 * `timeout_secs`, or at once if the server refuses the credentials. The error texts
    may hold secrets the server echoed: callers scrub them."""
    state: dict[str, Any] = {"connected": False, "last": None, "refusal": None}
    refused = asyncio.Event()

    async def on_error(e: Exception) -> None:
        state["last"] = e
        if not state["connected"] and "authorization violation" in str(e).lower():
            state["refusal"] = e
            refused.set()
        if error_cb is not None:
            await error_cb(e)

    opts: dict[str, Any] = {
        "servers": [s.strip() for s in (servers.reveal() or "").split(",") if s.strip()],
        "name": name, "connect_timeout": timeout_secs, "allow_reconnect": True, "max_reconnect_attempts": -1,
        "reconnect_time_wait": RECONNECT_WAIT_SECS, "error_cb": on_error,
    }
    if disconnected_cb is not None:
        opts["disconnected_cb"] = disconnected_cb
    if reconnected_cb is not None:
        opts["reconnected_cb"] = reconnected_cb
    if user:
        opts["user"] = user
        opts["password"] = password.reveal() if password else None
    if token:
        opts["token"] = token.reveal()
    if creds:
        opts["user_credentials"] = creds
    connecting = asyncio.ensure_future(nats.connect(**opts))
    waiting = asyncio.ensure_future(refused.wait())
    limit = timeout_secs * 2
    done, _ = await asyncio.wait({connecting, waiting}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if connecting in done:
        state["connected"] = True
        return connecting.result()
    connecting.cancel()
    with contextlib.suppress(BaseException):
        await connecting
    if refused.is_set():
        raise ConnectionError(f"the NATS server refused the credentials ({describe_error(state['refusal'])})")
    why = describe_error(state["last"]) if state["last"] is not None else None
    raise ConnectionError(f"no NATS server answered within {limit:g}s" + (f" (last error: {why})" if why else ""))


async def ensure_stream(js: Any, name: str, subject: str, create: bool) -> None:
    """The stream `name` exists: made (capturing `subject`) if missing and `create`."""
    try:
        await js.stream_info(name)
        return
    except nats.js.errors.NotFoundError:
        if not create:
            raise ValueError(f"JetStream stream {name!r} does not exist (create_stream=False)") from None
    await js.add_stream(name=name, subjects=[subject])


async def ensure_consumer(js: Any, stream: str, cfg: Any) -> None:
    """The durable consumer of `cfg` exists on `stream`, updated where its AckWait, max deliver
    or max ack pending differ from `cfg`."""
    try:
        info = await js.consumer_info(stream, cfg.durable_name)
    except nats.js.errors.NotFoundError:
        await js.add_consumer(stream, cfg)
        return
    c = info.config
    if (abs((c.ack_wait or 0) - cfg.ack_wait) > 1e-3 or c.max_deliver != cfg.max_deliver
            or c.max_ack_pending != cfg.max_ack_pending):
        await js.add_consumer(stream, cfg)  # an update of an existing durable
