"""Acks a JetStream spout can count on. A JetStream ack is a plain publish: one written to a
connection that then drops never reaches the server, which holds the message until its AckWait
and delivers it again. So an ack counts only when a flush (PING, then the server's PONG) came
back on the connection it was written to; acks not confirmed are sent again (the server ignores
a second ack of a message). And the in-progress acks that keep a long tree's message from being
delivered again (keep_in_progress)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from squall.connectors.nats.wire import IN_PROGRESS

FLUSH_TIMEOUT_SECS = 5.0  # how long an ack's confirmation (a PING's PONG) is waited for
RECONNECT_POLL_SECS = 0.05  # unconfirmed acks wait this long between looks at a reconnecting client
PAUSE_SECS = 0.003  # at least this long between two tries


class AckConfirmer:
    """The connection acks are written to (a number, one more per connection lost), and the
    acks sent and not yet confirmed. Used on the client's event loop only."""

    def __init__(self) -> None:
        self.connection = 0
        self._lost = asyncio.Event()  # set when the current connection is lost
        self.unconfirmed: list[tuple] = []

    def connection_lost(self) -> None:
        """nats-py calls its disconnected callback before it connects again: call this there."""
        self.connection += 1
        lost, self._lost = self._lost, asyncio.Event()
        lost.set()

    def mark(self) -> tuple[int, asyncio.Event]:
        """The connection what is written next goes to, for `confirmed`."""
        return self.connection, self._lost

    async def confirmed(self, nc: Any, mark: tuple[int, asyncio.Event]) -> bool:
        """True when everything written since `mark` reached the server (a flush came back on
        that connection); False at once when that connection is lost meanwhile."""
        connection, lost = mark
        flush = asyncio.ensure_future(nc.flush(timeout=FLUSH_TIMEOUT_SECS))
        gone = asyncio.ensure_future(lost.wait())
        await asyncio.wait((flush, gone), return_when=asyncio.FIRST_COMPLETED)
        gone.cancel()
        if not flush.done():
            flush.cancel()
        try:
            await flush
        except BaseException:  # noqa: BLE001 - timed out, reconnecting, closed or cancelled: not confirmed
            return False
        return connection == self.connection

    @staticmethod
    async def until_connected(nc: Any, closing: Any) -> None:
        """Wait (briefly at least) until the client is connected again, or `closing()`."""
        await asyncio.sleep(PAUSE_SECS)
        while not closing() and nc is not None and nc.is_reconnecting:
            await asyncio.sleep(RECONNECT_POLL_SECS)


async def keep_in_progress(nc_of: Callable[[], Any], inflight: dict, ack_wait: float,
                           closing: Callable[[], bool], counters: Any) -> None:
    """In-progress acks for messages in flight past a third of the AckWait, so that the server
    redelivers only the messages of a spout that is gone (runs even when next_tuple is not
    called because the topology is at max.spout.pending)."""
    every = max(0.05, ack_wait / 4)
    limit = ack_wait / 3
    while not closing():
        await asyncio.sleep(every)
        now = time.monotonic()
        try:
            held = list(inflight.values())
        except RuntimeError:  # changed while copied: next round
            continue
        for m in held:
            if now - m.touched_at > limit:
                m.touched_at = now
                with contextlib.suppress(Exception):
                    await nc_of().publish(m.handle.reply, IN_PROGRESS)
                    counters.add("touched")
