"""JetStreamSpout: a reliable spout over a NATS JetStream durable pull consumer (nats-py).

nats-py is asyncio; the spout owns an event loop in a background thread. There it keeps pull
requests outstanding at the consumer (each for up to `batch_size` messages, expiring after
`pull_expires_secs`), so messages flow in as they arrive, are decoded, and wait in a
thread-safe queue; the spout never holds more than it may have pending
(`topology.max.spout.pending`, also the consumer's `max_ack_pending`). `next_tuple` only takes
from that queue, so it never waits on the network. Acks, naks and dead letters go back to the
loop through another queue. The pull's messages come straight off nats-py's protocol parser and
a wave's acks are written as one buffer (`wire`), where this nats-py allows it.

Each message is emitted with msg id `(stream sequence, delivery number)`. When the tree is
acked the message is acked; an ack counts (and `on_acked` runs) once a flush on the same
connection confirms the server has it, and acks a dropped connection may have lost are sent
again after the reconnect. When it fails it is `nak`ed with `retry_delay_secs` of delay; the
attempt number is JetStream's delivery count, and the spout counts the topology's failures of the
messages it naks (in memory: a message another spout takes over after a crash starts again from
none). The consumer's `AckWait` is the topology's message timeout, and messages still in flight
after a third of it get an in-progress ack, so the server redelivers a message only when the spout
holding it is gone. When the `max_retries + 1`-th failure comes (or a payload does not decode)
the message is published to the dead-letter subject `squall.dlq.<stream>` (captured by the stream
`<stream>_DLQ`, created if missing) with its original data and `squall-*` headers, then acked.
The consumer's `max_deliver` is `max_deliveries`: a message the server stops delivering because
its deliveries ran out without an ack (its spout died each time) is announced by a JetStream
advisory; task 0 of the spout copies it to the dead-letter subject with reason "lost".

Connection: `url` (comma-separated servers), else `NATS_URL`; credentials from `user` /
`password`, `token`, `creds` (a .creds file), else `NATS_USER`, `NATS_PASSWORD`, `NATS_TOKEN`,
`NATS_CREDS`; default nats://127.0.0.1:4222. Secrets are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from squall.connectors.backoff import RECONNECT_MAX_SECS, Backoff
from squall.connectors.dead_letters import Failure
from squall.connectors.event_loop import EventLoopThread
from squall.connectors.io_thread import ACKED, DEAD, RECONNECTED, REPORT, IOThreadBrokerSpout
from squall.connectors.nats import wire
from squall.connectors.nats.acks import AckConfirmer, keep_in_progress
from squall.connectors.nats.connect import connect, ensure_consumer, ensure_stream
from squall.connectors.nats.pulls import MAX_PULLS, PULL_BATCH, PullRequests, delivery_ids
from squall.connectors.settings import Secret, env_first, redact_url, url_password
from squall.connectors.spout import Message

log = logging.getLogger("squall.connectors")

ROOM_WAIT_SECS = 0.003  # the pull loop's pause while the spout holds all it may
ERROR_PAUSE_SECS = 0.5
GIVE_BACK = "give back"  # an action: hold the message until the spout may give it back (_release_held)
CLOSE_TIMEOUT_SECS = 10.0


def nats_servers(url: str | None = None) -> Secret:
    return Secret(url or env_first("NATS_URL", default="nats://127.0.0.1:4222"))


class JetStreamSpout(IOThreadBrokerSpout):
    """A reliable spout over the JetStream stream `stream`, durable pull consumer `durable`; see
    the module docstring.

    subject: the consumer's filter subject (and the new stream's subject, when `create_stream`
    creates it; default: the stream's name). ack_wait_secs: default the message timeout.
    batch_size: messages per pull request; pull_expires_secs: how long one pull request waits at
    the server for messages.
    """

    RETRY_ACTION = "nak"
    DEAD_ACTION = "dlq"
    broker_name = "NATS"

    def __init__(self, stream: str, subject: str | None = None, durable: str = "squall", url: str | None = None, *,
                 user: str | None = None, password: str | None = None, token: str | None = None,
                 creds: str | None = None, scheme: Any = "string", fields: Any = ("message",),
                 meta_field: str | None = None, max_retries: int | None = None, retry_delay_secs: float = 1.0,
                 dead_letter_subject: str | None = None, dead_letter_stream: str | None = None,
                 create_stream: bool = True, ack_wait_secs: float | None = None, batch_size: int = PULL_BATCH,
                 pull_expires_secs: float = 1.0, connect_timeout_secs: float = 10.0,
                 max_deliveries: int | None = None):
        super().__init__(scheme, fields, meta_field, max_retries, retry_delay_secs, max_deliveries)
        self.stream = stream
        self.subject = subject
        self.durable = durable
        self._servers = nats_servers(url)
        self.url = redact_url(self._servers.reveal())
        self.user = user or env_first("NATS_USER")
        self._password = Secret(password or env_first("NATS_PASSWORD"))
        self._token = Secret(token or env_first("NATS_TOKEN"))
        self.creds = creds or env_first("NATS_CREDS")
        self.dead_letter_subject = dead_letter_subject or f"squall.dlq.{stream}"
        self.dead_letter_stream = dead_letter_stream or f"{stream}_DLQ"
        self.create_stream = create_stream
        self.ack_wait_secs = ack_wait_secs
        self.batch_size = int(batch_size)
        self.pull_expires_secs = float(pull_expires_secs)
        self.connect_timeout_secs = float(connect_timeout_secs)
        self._io: EventLoopThread | None = None

    def _source_name(self) -> str:
        return self.stream

    def _secrets(self) -> list[Any]:
        pw = [url_password(u) for u in self._servers.reveal().split(",")]
        return [self._password, self._token, *pw]

    # -- driver side ----------------------------------------------------------------------

    def _connect(self) -> None:
        self.ack_wait = float(self.ack_wait_secs or self.message_timeout_secs)
        self.max_deliver = self.max_deliveries
        self._failures: dict[int, int] = {}  # stream seq -> failures, of what this spout nak'ed (loop side)
        self.prefetch = self._prefetch()
        self._drainer: Any = None
        self._fetcher: Any = None
        self._keeper: Any = None
        self._nc: Any = None
        self._acks = AckConfirmer()
        self._held: list[Message] = []  # received while deactivated, or not emitted when it was (loop side)
        self._io = EventLoopThread(f"squall-nats-{self.component_id}-{self.task_index}")
        try:
            self._io.call(self._aopen(), self.connect_timeout_secs * 3 + 10)
        except Exception as e:  # noqa: BLE001
            with contextlib.suppress(Exception):
                self._io.call(self._aclose_quietly(), 5)
            self._io.stop()
            self._io = None
            raise ConnectionError(f"cannot consume JetStream stream {self.stream!r} (durable {self.durable!r}) at "
                                  f"{self.url}: {self._error_text(e)}") from None

    def _wake(self) -> bool:
        io = self._io
        if io is None:
            return False
        io.soon(self._kick)
        return True

    def _meta(self, m: Message) -> dict[str, Any]:
        nm = m.handle
        return {"id": m.id, "attempts": m.attempts, "source": self.stream, "subject": nm.subject,
                "headers": dict(nm.headers or {})}

    def activate(self) -> None:
        self._active = True

    def deactivate(self) -> None:
        self._active = False  # the pull loop stops pulling; what was received goes back (_release_held)
        while self._incoming:
            try:
                m = self._incoming.popleft()
            except IndexError:
                break
            self._act((GIVE_BACK, m, None))

    def _disconnect(self) -> None:
        io, self._io = self._io, None
        if io is None:
            return
        self._closing = True
        try:
            io.call(self._aclose(), CLOSE_TIMEOUT_SECS)
        except Exception as e:  # noqa: BLE001
            log.warning("%s: closing the NATS connection: %s", self.component_id, self._error_text(e))
        io.stop()

    # -- loop side ------------------------------------------------------------------------

    async def _aopen(self) -> None:
        self._nc = await connect(
            self._servers, f"squall {self.component_id}[{self.task_index}]", self.connect_timeout_secs,
            user=self.user, password=self._password, token=self._token, creds=self.creds,
            error_cb=self._on_error, disconnected_cb=self._on_disconnected, reconnected_cb=self._on_reconnected)
        self._js = self._nc.jetstream()
        await ensure_stream(self._js, self.stream, self.subject or self.stream, self.create_stream)
        await ensure_stream(self._js, self.dead_letter_stream, self.dead_letter_subject, True)
        await ensure_consumer(self._js, self.stream, ConsumerConfig(
            durable_name=self.durable, ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL,
            ack_wait=self.ack_wait, max_deliver=self.max_deliver, max_ack_pending=self.prefetch,
            filter_subject=self.subject or None))
        self._inbox = self._nc.new_inbox()
        self._pulls = PullRequests(self._inbox, self.pull_expires_secs)
        self._pull_min = min(self.batch_size, max(1, self.prefetch // 4))
        self._pull_sub = await self._nc.subscribe(f"{self._inbox}.*", cb=self._on_pulled,
                                                  pending_msgs_limit=-1, pending_bytes_limit=-1)
        self._lean = wire.supported(self._nc, self._pull_sub)
        if self._lean:  # the pull's messages skip nats-py's Msg, queue and callback task (wire)
            wire.tap(self._nc, self._pull_sub, self._pull_status, self._delivered)
        if self.task_index == 0:
            await self._nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{self.stream}.{self.durable}",
                                     cb=self._on_max_deliveries)
        self._fetcher = asyncio.ensure_future(self._pull_loop())
        self._keeper = asyncio.ensure_future(keep_in_progress(
            lambda: self._nc, self._inflight, self.ack_wait, lambda: self._closing, self.counters))
        log.info("%s[%d]: consuming JetStream %r durable %r from %s", self.component_id, self.task_index,
                 self.stream, self.durable, self.url)

    def _room(self) -> int:
        if not self._active:
            return 0
        return self.prefetch - len(self._inflight) - len(self._incoming)

    async def _pull_loop(self) -> None:
        """Keep pull requests outstanding (at most MAX_PULLS) for as many messages as the spout
        has room for (see pulls)."""
        api = f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{self.durable}"
        expires_ns = int(self.pull_expires_secs * 1e9)
        backoff = Backoff(ERROR_PAUSE_SECS, RECONNECT_MAX_SECS)
        pulls = self._pulls
        while not self._closing:
            now = time.monotonic()
            owed = pulls.owed(now)  # forgets the requests past their expiry
            if self._held and (self._active or not len(pulls)):
                self._release_held()
            room = self._room() - owed
            if room >= self._pull_min and len(pulls) < MAX_PULLS:
                batch = min(self.batch_size, room)
                subject = pulls.open(batch, now)
                try:
                    await self._nc.publish(api, json.dumps({"batch": batch, "expires": expires_ns}).encode(),
                                           reply=subject)
                    backoff.reset()
                except Exception as e:  # noqa: BLE001 - report, pause, go on (nats-py reconnects)
                    pulls.close(subject)
                    delay = backoff.next()
                    if not self._closing:
                        self._done.append((REPORT, f"pull from JetStream {self.stream!r} failed: "
                                                   f"{self._error_text(e)}; next try in {delay:.1f}s", None))
                    await asyncio.sleep(delay)
                continue
            await asyncio.sleep(ROOM_WAIT_SECS)

    async def _on_pulled(self, nm: Any) -> None:
        """A message (or a status) for one of this spout's pull requests, as nats-py's Msg
        (without the lean path of wire.tap)."""
        if not nm.reply:
            self._pull_status(nm.subject, nm.headers.get("Status") if nm.headers else None)
        else:
            self._delivered(wire.Delivery(nm.subject, nm.reply, nm.headers), nm.data)

    def _pull_status(self, subject: str, status: str | None) -> None:
        if status is not None and status != "100":  # 404/408/409 on the request's own subject: it is over
            self._pulls.close(subject)  # (100: a heartbeat)

    def _delivered(self, handle: wire.Delivery, data: bytes) -> None:
        self._pulls.delivered()
        seq, n = delivery_ids(handle.reply)
        m = Message((seq, n), data, n, handle=handle, headers=handle.headers, failures=self._failures.get(seq, 0))
        self.decode(m)  # here, off the wave's path
        if self._active:
            self._incoming.append(m)
        else:  # deactivated meanwhile: given back once no pull request of ours is open
            self._held.append(m)

    def _release_held(self) -> None:
        """What a deactivated spout holds: its own again once it is active, else given back (a
        nak) once none of its pull requests is open. Given back while one is, the server would hand
        the message straight back to it, and each round would use one of its deliveries: a message
        published while the spout was off would be dead-lettered as lost at once."""
        held, self._held = self._held, []
        if self._active:
            self._incoming.extend(held)
            return
        self._actions.extend(("nak", m, None) for m in held)  # no failure: no delay
        self.counters.add("given back", len(held))
        self._kick()

    def _kick(self) -> None:
        self._scheduled = False
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.ensure_future(self._drain_actions())

    async def _drain_actions(self) -> None:
        """Run the queued actions. An ack counts once confirmed (see acks). What is sent
        is (DEAD, message, failure) for a dead letter, (ACKED, [messages], None) for acks."""
        actions, acks = self._actions, self._acks
        while actions or acks.unconfirmed:
            mark = acks.mark()
            sent, acks.unconfirmed = acks.unconfirmed, []
            again = [m for kind, ms, _failure in sent for m in (ms if kind == ACKED else [ms])]
            with contextlib.suppress(Exception):  # not sent: not confirmed below either
                await self._publish_acks(again)
            acked: list[Message] = []
            while actions:
                kind, m, failure = actions.popleft()
                if kind == "acks":  # a wave's acks (_ack_messages): written together below
                    acked.extend(m)
                    continue
                handle = m.handle
                try:
                    if kind == GIVE_BACK:
                        self._held.append(m)
                    elif kind == "nak":
                        if m.failures:
                            self._failures[m.id[0]] = m.failures
                        delay = self.retry_delay_secs if failure is not None else 0
                        await self._nc.publish(handle.reply, wire.NAK + (
                            b' {"delay": %d}' % int(delay * 1e9) if delay else b""))
                    else:
                        await self._publish_dead_letter(m.body, handle.headers, failure, m.id)
                        await self._nc.publish(handle.reply)
                        self._failures.pop(m.id[0], None)
                        sent.append((DEAD, m, failure))
                except Exception as e:  # noqa: BLE001 - the message stays unacked: redelivered later
                    self._done.append((REPORT, f"JetStream {kind} of message {m.id} failed: "
                                               f"{self._error_text(e)}", None))
            try:
                await self._publish_acks(acked)
                if acked:
                    sent.append((ACKED, acked, None))
                    if self._failures:
                        for m in acked:
                            self._failures.pop(m.id[0], None)
            except Exception as e:  # noqa: BLE001 - unacked: redelivered after the AckWait
                self._done.append((REPORT, f"JetStream ack of {len(acked)} message(s) failed: "
                                           f"{self._error_text(e)}", None))
            if sent and not await acks.confirmed(self._nc, mark):
                acks.unconfirmed = sent
                if self._closing or self._nc is None or self._nc.is_closed:
                    return  # not confirmed: the server redelivers them after their AckWait
                await acks.until_connected(self._nc, lambda: self._closing)
                continue
            self._done.extend(sent)

    async def _publish_acks(self, ms: list[Message]) -> None:
        if self._lean:
            await wire.publish_empty(self._nc, [m.handle.reply for m in ms])
            return
        for m in ms:
            await self._nc.publish(m.handle.reply)

    def _ack_messages(self, ms: list[Message]) -> None:
        self._act(("acks", ms, None))  # one action for a wave's acks

    async def _publish_dead_letter(self, data: bytes, headers: dict | None, failure: Failure, source_id: Any) -> None:
        hdrs = {k: str(v) for k, v in (headers or {}).items() if not k.lower().startswith("nats-")}
        hdrs.update(failure.fields(self.stream, source_id))
        await self._js.publish(self.dead_letter_subject, data or b"", headers=hdrs, timeout=5)

    async def _on_max_deliveries(self, msg: Any) -> None:
        """A message whose deliveries ran out without an ack: copy it to the dead letters."""
        try:
            adv = json.loads(msg.data)
            seq, deliveries = int(adv["stream_seq"]), int(adv.get("deliveries") or self.max_deliver)
            raw = await self._js.get_msg(self.stream, seq)
            failure = Failure("lost", f"delivered {deliveries} time(s), the consumer's max_deliver, without an ack",
                              deliveries)
            await self._publish_dead_letter(raw.data, raw.headers, failure, (seq, deliveries))
            m = Message((seq, deliveries), raw.data or b"", deliveries, handle=None, headers=raw.headers)
            self._done.append((DEAD, m, failure))
        except Exception as e:  # noqa: BLE001
            self._done.append((REPORT, f"dead-lettering a message past max_deliver failed: "
                                       f"{self._error_text(e)}", None))

    async def _aclose(self) -> None:
        for task in (self._fetcher, self._keeper):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if self._drainer is not None and not self._drainer.done():
            with contextlib.suppress(Exception):
                await self._drainer
        # Give back what this spout held: received but not emitted, and trees never finished.
        for m in [*self._held, *self._incoming]:
            self._actions.append(("nak", m, None))
        self._held.clear()
        self._incoming.clear()
        for m in list(self._inflight.values()):
            self._actions.append(("nak", m, None))
        await self._drain_actions()
        await self._aclose_quietly()

    async def _aclose_quietly(self) -> None:
        nc, self._nc = self._nc, None
        if nc is None:
            return
        with contextlib.suppress(Exception):
            await nc.flush(timeout=5)
        with contextlib.suppress(Exception):
            await nc.close()

    async def _on_error(self, e: Exception) -> None:
        if not self._closing and self._nc is not None:
            log.warning("%s: NATS error: %s", self.component_id, self._error_text(e))

    async def _on_disconnected(self) -> None:
        self._acks.connection_lost()
        if not self._closing:
            self._done.append((REPORT, f"disconnected from NATS at {self.url}; reconnecting", None))

    async def _on_reconnected(self) -> None:
        self._done.append((RECONNECTED, None, None))
        log.info("%s: reconnected to NATS at %s", self.component_id, self.url)
