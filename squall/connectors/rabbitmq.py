"""RabbitMQSpout: a reliable spout over a RabbitMQ queue (pika, manual acks).

Each message is consumed with a manual ack and emitted with its delivery as msg id. The
channel's prefetch is `topology.max.spout.pending` (or `prefetch`), so the broker never hands
the spout more messages than the topology may have pending. When the tree is acked the spout
`basic_ack`s the delivery. When it fails, the message is published again (with publisher
confirms, before the original is acked) carrying its attempt count in the `x-squall-attempts`
header: to a delay queue `<queue>.retry` whose TTL sends it back to the queue after
`retry_delay_secs`, or straight back to the queue when the delay is 0. After `max_retries`
retries, or when its payload does not decode, it goes to the dead-letter queue `<queue>.dlq`
with the original body and `squall-*` headers (reason, error, attempts, ...), then is acked.

If the connection drops, RabbitMQ hands every unacked message out again (to this spout after
it reconnects, or to another consumer); acks and fails of deliveries from the old connection
are ignored (they are counted as `stale`), and the spout reconnects with a backoff.

Connection: `url` (amqp://user:pass@host:port/vhost), else the environment: `AMQP_URL`,
`RABBITMQ_URL`, else `RABBITMQ_HOST`, `RABBITMQ_PORT`, `RABBITMQ_USER` (or
`RABBITMQ_DEFAULT_USER`), `RABBITMQ_PASSWORD` (or `RABBITMQ_DEFAULT_PASS`), `RABBITMQ_VHOST`;
defaults 127.0.0.1:5672, guest/guest, vhost "/". The password is never logged.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import deque
from typing import Any
from urllib.parse import quote

import pika
import pika.exceptions

from squall.connectors.base import (
    BrokerSpout,
    Failure,
    Message,
    Secret,
    env_first,
    redact_url,
    scrub,
    url_password,
    url_with_password,
)

log = logging.getLogger("squall.connectors")

ATTEMPTS_HEADER = "x-squall-attempts"  # failed deliveries so far, on a retried message
REASON_HEADER = "x-squall-last-reason"  # why the last attempt failed, on a retried message
MAX_PREFETCH = 65535
RECONNECT_MIN_SECS = 0.2
RECONNECT_MAX_SECS = 10.0

# pika's errors that mean the connection or channel is gone.
_LOST = (pika.exceptions.AMQPConnectionError, pika.exceptions.ChannelClosed,
         pika.exceptions.ChannelWrongStateError, pika.exceptions.ConnectionWrongStateError, OSError)


def rabbitmq_url(url: str | None = None, host: str | None = None, port: int | None = None,
                 username: str | None = None, password: str | None = None,
                 virtual_host: str | None = None) -> Secret:
    """The AMQP URL from the arguments, else the environment, else the local defaults."""
    url = url or env_first("AMQP_URL", "RABBITMQ_URL")
    if url:
        return Secret(url_with_password(url, password) if password else url)
    host = host or env_first("RABBITMQ_HOST", default="127.0.0.1")
    port = int(port or env_first("RABBITMQ_PORT", default="5672"))
    user = username or env_first("RABBITMQ_USER", "RABBITMQ_DEFAULT_USER", default="guest")
    pw = password or env_first("RABBITMQ_PASSWORD", "RABBITMQ_DEFAULT_PASS", default="guest")
    vhost = virtual_host or env_first("RABBITMQ_VHOST", "RABBITMQ_DEFAULT_VHOST", default="/")
    return Secret(f"amqp://{quote(user, safe='')}:{quote(pw, safe='')}@{host}:{port}/{quote(vhost, safe='')}")


def _int_header(headers: dict, name: str) -> int:
    try:
        return max(0, int(headers.get(name) or 0))
    except (TypeError, ValueError):
        return 0


class RabbitMQSpout(BrokerSpout):
    """A reliable spout over the RabbitMQ queue `queue`; see the module docstring.

    scheme: "string", "json", "bytes" or a callable; fields: the payload's field name;
    meta_field: name of an optional second field with {id, attempts, source, redelivered, headers}.
    max_retries: retries before the dead-letter queue (default: the topology's squall.max.replays).
    retry_delay_secs: delay before a failed message comes back (0: requeued at once).
    prefetch: unacked messages the broker may send (default: topology.max.spout.pending, else 1000).
    declare: declare the queue (durable, with `queue_arguments`), the retry and dead-letter queues.
    """

    def __init__(self, queue: str, url: str | None = None, *, host: str | None = None, port: int | None = None,
                 username: str | None = None, password: str | None = None, virtual_host: str | None = None,
                 scheme: Any = "string", fields: Any = ("message",), meta_field: str | None = None,
                 max_retries: int | None = None, retry_delay_secs: float = 1.0,
                 dead_letter_queue: str | None = None, retry_queue: str | None = None,
                 prefetch: int | None = None, declare: bool = True, queue_arguments: dict | None = None,
                 heartbeat_secs: int = 60, connect_timeout_secs: float = 10.0):
        super().__init__(scheme, fields, meta_field, max_retries, retry_delay_secs)
        self.queue = queue
        self._url = rabbitmq_url(url, host, port, username, password, virtual_host)
        self.url = redact_url(self._url.reveal())
        self.dead_letter_queue = dead_letter_queue or f"{queue}.dlq"
        self.retry_queue = retry_queue or f"{queue}.retry"
        self.prefetch = prefetch
        self.declare = declare
        self.queue_arguments = dict(queue_arguments or {})
        self.heartbeat_secs = heartbeat_secs
        self.connect_timeout_secs = connect_timeout_secs
        self._conn: Any = None

    def _source_name(self) -> str:
        return self.queue

    def _secrets(self) -> list[Any]:
        return [self._url, url_password(self._url.reveal())]

    # -- connection -----------------------------------------------------------------------

    def _connect(self) -> None:
        # Storm calls activate/deactivate from outside the wave thread: every use of the pika
        # connection (not thread-safe) holds this lock.
        self._lock = threading.RLock()
        self._active = True
        self._consumer_tag: str | None = None
        self._gen = 0
        self._buffer: deque = deque()
        self._conn = self._ch = self._pub = None
        self._backoff = RECONNECT_MIN_SECS
        self._next_connect = 0.0
        try:
            self._connect_once()
        except Exception as e:  # noqa: BLE001
            raise ConnectionError(f"cannot connect to RabbitMQ at {self.url} (queue {self.queue!r}): "
                                  f"{scrub(_describe(e), self._secrets())}") from None

    def _connect_once(self) -> None:
        params = pika.URLParameters(self._url.reveal())
        params.heartbeat = self.heartbeat_secs
        params.blocked_connection_timeout = self.connect_timeout_secs * 3
        params.socket_timeout = self.connect_timeout_secs
        params.connection_attempts = 1
        params.client_properties = {"connection_name": f"squall {self.component_id}[{self.task_index}]"}
        conn = pika.BlockingConnection(params)
        try:
            ch = conn.channel()
            if self.declare:
                self._declare(ch)
            ch.basic_qos(prefetch_count=min(MAX_PREFETCH, int(self.prefetch or self._prefetch())))
            pub = conn.channel()
            pub.confirm_delivery()
            self._gen += 1
            self._buffer = deque()
            gen = self._gen
            buf = self._buffer

            def on_delivery(_ch: Any, method: Any, props: Any, body: bytes) -> None:
                buf.append((gen, method.delivery_tag, method.redelivered, props, body))

            self._on_delivery = on_delivery
            self._consumer_tag = ch.basic_consume(self.queue, on_delivery, auto_ack=False) if self._active else None
        except Exception:
            _close_quietly(conn)
            raise
        self._conn, self._ch, self._pub = conn, ch, pub
        log.info("%s[%d]: consuming %r from %s", self.component_id, self.task_index, self.queue, self.url)

    def _declare(self, ch: Any) -> None:
        try:
            ch.queue_declare(self.queue, durable=True, arguments=self.queue_arguments or None)
        except pika.exceptions.ChannelClosedByBroker as e:
            raise ValueError(f"queue {self.queue!r} exists with other settings ({e.reply_text}); pass "
                             f"declare=False, or queue_arguments matching the existing queue") from None
        ch.queue_declare(self.dead_letter_queue, durable=True)
        if self.retry_delay_secs > 0:
            args = {"x-message-ttl": max(1, int(self.retry_delay_secs * 1000)),
                    "x-dead-letter-exchange": "", "x-dead-letter-routing-key": self.queue}
            try:
                ch.queue_declare(self.retry_queue, durable=True, arguments=args)
            except pika.exceptions.ChannelClosedByBroker as e:
                raise ValueError(f"retry queue {self.retry_queue!r} exists with another delay or target "
                                 f"({e.reply_text}); delete it or pass retry_queue=<another name>") from None

    def _lost(self, error: BaseException) -> None:
        """The connection is gone: RabbitMQ requeues what this spout held; forget it, reconnect."""
        dropped = len(self._inflight) + len(self._buffer)
        self._report(f"RabbitMQ connection to {self.url} lost ({scrub(_describe(error), self._secrets())}); "
                     f"{dropped} unacked message(s) go back to queue {self.queue!r}; reconnecting")
        self._inflight.clear()
        self._buffer.clear()
        conn, self._conn, self._ch, self._pub = self._conn, None, None, None
        _close_quietly(conn)
        self._next_connect = time.monotonic()

    def _maybe_reconnect(self) -> bool:
        now = time.monotonic()
        if now < self._next_connect:
            return False
        try:
            self._connect_once()
        except Exception as e:  # noqa: BLE001 - keep trying, with a backoff
            self._next_connect = now + self._backoff
            self._backoff = min(RECONNECT_MAX_SECS, self._backoff * 2)
            self._report(f"cannot reconnect to RabbitMQ at {self.url}: {scrub(_describe(e), self._secrets())}; "
                         f"next try in {self._backoff:.1f}s")
            return False
        self._backoff = RECONNECT_MIN_SECS
        self.counters.reconnects += 1
        return True

    def _disconnect(self) -> None:
        with self._lock:
            conn, self._conn, self._ch, self._pub = self._conn, None, None, None
            _close_quietly(conn)  # what is not acked goes back to the queue

    def deactivate(self) -> None:
        """Stop consuming: cancel the consumer (pika requeues what it had not dispatched) and
        give back what the spout had not emitted; trees in flight finish as usual."""
        with self._lock:
            self._active = False
            if self._ch is None or self._consumer_tag is None:
                return
            try:
                self._ch.basic_cancel(self._consumer_tag)
                self._consumer_tag = None
                while self._buffer:
                    gen, tag, *_ = self._buffer.popleft()
                    if gen == self._gen:
                        self._ch.basic_nack(tag, requeue=True)
            except _LOST as e:
                self._lost(e)

    def activate(self) -> None:
        with self._lock:
            self._active = True
            if self._ch is None or self._consumer_tag is not None:
                return
            try:
                self._consumer_tag = self._ch.basic_consume(self.queue, self._on_delivery, auto_ack=False)
            except _LOST as e:
                self._lost(e)

    # -- messages -------------------------------------------------------------------------

    def _next_message_unlocked(self) -> Message | None:
        if self._conn is None and not self._maybe_reconnect():
            return None
        buf = self._buffer
        if not buf:
            try:
                self._conn.process_data_events(time_limit=0)
            except _LOST as e:
                self._lost(e)
                return None
            if not buf:
                return None
        gen, tag, redelivered, props, body = buf.popleft()
        headers = props.headers or {}
        attempts = max(_int_header(headers, ATTEMPTS_HEADER), _int_header(headers, "x-delivery-count")) + 1
        return Message((gen, tag), body, attempts, (gen, tag, props, redelivered), headers)

    def _meta(self, m: Message) -> dict[str, Any]:
        return {"id": m.id, "attempts": m.attempts, "source": self.queue, "redelivered": m.handle[3],
                "headers": dict(m.headers or {})}

    def _current(self, m: Message) -> bool:
        if self._ch is None or m.handle[0] != self._gen:
            self.counters.stale += 1  # from a connection that is gone: RabbitMQ redelivers it
            return False
        return True

    def _ack_message_unlocked(self, m: Message) -> None:
        if not self._current(m):
            return
        try:
            self._ch.basic_ack(m.handle[1])
        except _LOST as e:
            self._lost(e)
            return
        self._acked(m)

    def _republish(self, m: Message, routing_key: str, headers: dict) -> bool:
        """Publish a copy of `m` (confirmed), then ack the original; False if the copy was refused."""
        props = copy.copy(m.handle[2])
        props.headers = headers
        if not props.delivery_mode:
            props.delivery_mode = pika.DeliveryMode.Persistent
        tag = m.handle[1]
        try:
            self._pub.basic_publish("", routing_key, m.body, props, mandatory=True)
        except (pika.exceptions.UnroutableError, pika.exceptions.NackError) as e:
            self._report(f"RabbitMQ refused the copy of message {tag} for {routing_key!r} ({type(e).__name__}); "
                         f"requeued it as it is")
            try:
                self._ch.basic_nack(tag, requeue=True)
            except _LOST as e2:
                self._lost(e2)
            return False
        except _LOST as e:
            self._lost(e)
            return False
        try:
            self._ch.basic_ack(tag)
        except _LOST as e:
            self._lost(e)  # the copy is stored: the original comes back too (at least once)
            return False
        return True

    def _retry_message_unlocked(self, m: Message, failure: Failure) -> None:
        if not self._current(m):
            return
        headers = dict(m.headers or {})
        headers[ATTEMPTS_HEADER] = m.attempts
        headers[REASON_HEADER] = failure.kind
        target = self.retry_queue if self.retry_delay_secs > 0 else self.queue
        self._republish(m, target, headers)

    def _dead_letter_unlocked(self, m: Message, failure: Failure) -> None:
        if not self._current(m):
            return
        headers = dict(m.headers or {})
        headers.pop(REASON_HEADER, None)
        headers.update(failure.fields(self.queue, m.handle[1]))
        if self._republish(m, self.dead_letter_queue, headers):
            self._dead_lettered(m, failure)

    # -- every pika call under the lock ----------------------------------------------------

    def _next_message(self) -> Message | None:
        with self._lock:
            return self._next_message_unlocked()

    def _ack_message(self, m: Message) -> None:
        with self._lock:
            self._ack_message_unlocked(m)

    def _retry_message(self, m: Message, failure: Failure) -> None:
        with self._lock:
            self._retry_message_unlocked(m, failure)

    def _dead_letter(self, m: Message, failure: Failure) -> None:
        with self._lock:
            self._dead_letter_unlocked(m, failure)


def _describe(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _close_quietly(conn: Any) -> None:
    if conn is None:
        return
    try:
        if conn.is_open:
            conn.close()
    except Exception:  # noqa: BLE001 - closing a broken connection may fail; nothing to do
        pass
