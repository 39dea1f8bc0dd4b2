"""The JetStream spout's messages and acks without nats-py's per-message work.

nats-py hands each message of a subscription through a `Msg` dataclass, an asyncio queue and a
callback task, and writes each ack as its own publish (subject checks, a command, a flush
request). Per message that costs more than the engine's own per-message work on the driver,
and holds the spout well below what the same client reads and acks alone. Here a pull
subscription's messages go straight from the protocol parser to a handler as (subject, reply,
payload, headers), and a batch of acks is written as one buffer.

Both lean on nats-py internals (`Client._process_msg`, `_send_command`, `_flush_pending`,
`Subscription._id`); `supported(nc, sub)` says whether this client has them, and the spout takes
nats-py's public path when it does not.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

OnStatus = Callable[[str, str | None], None]  # (subject, status code)
OnMessage = Callable[["Delivery", bytes], None]  # (the message's handle, payload)

NAK = b"-NAK"
IN_PROGRESS = b"+WPI"
STATUS_AT = len(b"NATS/1.0 ")  # a status message's headers: "NATS/1.0 404 No Messages\r\n..."


class Delivery:
    """A message's handle: where it came from and where its acks go (what nats-py's `Msg` held
    for the spout, without its dataclass)."""

    __slots__ = ("subject", "reply", "headers")

    def __init__(self, subject: str, reply: str, headers: dict[str, str] | None):
        self.subject = subject
        self.reply = reply
        self.headers = headers


PROCESS_MSG_ARGS = ["sid", "subject", "reply", "data", "headers"]  # what the parser passes, by nats-py 2.x


def supported(nc: Any, sub: Any) -> bool:
    """Whether this nats-py client and its subscription `sub` have the internals the lean path
    uses, as it uses them."""
    if not isinstance(getattr(sub, "_id", None), int):
        return False
    if not all(callable(getattr(nc, name, None)) for name in ("_process_msg", "_send_command", "_flush_pending",
                                                               "_process_headers")):
        return False
    try:
        return list(inspect.signature(nc._process_msg).parameters) == PROCESS_MSG_ARGS
    except (TypeError, ValueError):
        return False


def tap(nc: Any, sub: Any, on_status: OnStatus, on_message: OnMessage) -> None:
    """Messages of `sub` go from the protocol parser to `on_message`, and its status messages
    (no reply subject) to `on_status`; every other subscription's go the usual way."""
    sid = sub._id
    usual = nc._process_msg

    async def process_msg(s: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if s != sid:
            await usual(s, subject, reply, data, headers)
            return
        nc.stats["in_msgs"] += 1
        nc.stats["in_bytes"] += len(data)
        if not reply:
            on_status(subject.decode(), status(headers) if headers else None)
            return
        parsed = await nc._process_headers(headers) if headers else None
        on_message(Delivery(subject.decode(), reply.decode(), parsed), data)

    nc._process_msg = process_msg


def status(headers: bytes) -> str:
    """The status code of a status message's raw headers ("404", "408", "100", ...)."""
    return headers[STATUS_AT:STATUS_AT + 3].decode(errors="replace")


async def publish_empty(nc: Any, subjects: list[str]) -> None:
    """An empty message to each subject (a JetStream ack each), written as one buffer; through
    nats-py's publish, one by one, while the client is not connected (it then buffers or
    refuses as it does for any publish)."""
    if not subjects:
        return
    if not nc.is_connected:
        for s in subjects:
            await nc.publish(s)
        return
    await nc._send_command("".join([f"PUB {s} 0\r\n\r\n" for s in subjects]).encode())
    await nc._flush_pending()
