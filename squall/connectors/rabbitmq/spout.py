"""RabbitMQSpout: a reliable spout over a RabbitMQ queue (pika, manual acks).

Each message is consumed with a manual ack and emitted with its delivery as msg id. The
channel's prefetch is `topology.max.spout.pending` (or `prefetch`), so the broker never hands
the spout more messages than the topology may have pending. When the tree is acked the spout
`basic_ack`s the delivery. When it fails, the message is published again (with publisher
confirms, before the original is acked) carrying its deliveries and the topology's failures of it
in the `x-squall-attempts` and `x-squall-failures` headers: to a delay queue `<queue>.retry` whose
TTL sends it back to the queue after `retry_delay_secs`, or straight back to the queue when the
delay is 0. After `max_retries` failures, or when its payload does not decode, it goes to the
dead-letter queue `<queue>.dlq`
with the original body and `squall-*` headers (reason, error, attempts, ...), then is acked.

The connection lives in a thread of its own (pika is not thread-safe): it receives and decodes
messages into a queue that `next_tuple` only takes from, and it performs the acks, retries and
dead letters that the spout hands it. `deactivate` cancels the consumer and gives back what was
not emitted yet; `activate` consumes again.

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
from typing import Any
from urllib.parse import quote

import pika
import pika.exceptions

from squall.connectors.column_spout import ColumnSpoutMixin
from squall.connectors.io_thread import ACKED, DEAD, REPORT, STALE, IOThreadBrokerSpout
from squall.connectors.rabbitmq.tags import DeliveryTags
from squall.connectors.settings import Secret, env_first, redact_url, url_with_password
from squall.connectors.spout import Message

log = logging.getLogger("squall.connectors")

ATTEMPTS_HEADER = "x-squall-attempts"  # deliveries so far, on a retried message
FAILURES_HEADER = "x-squall-failures"  # the topology's failures so far, on a retried message
REASON_HEADER = "x-squall-last-reason"  # why the last attempt failed, on a retried message
MAX_PREFETCH = 65535


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


class RabbitMQSpout(IOThreadBrokerSpout):
    """A reliable spout over the RabbitMQ queue `queue`; see the module docstring.

    scheme: "string", "json", "bytes" or a callable; fields: the payload's field name;
    meta_field: name of an optional second field with {id, attempts, source, redelivered, headers}.
    max_retries: retries before the dead-letter queue (default: the topology's squall.max.replays).
    max_deliveries: deliveries lost with their worker before the dead-letter queue (default: the
    topology's squall.max.deliveries).
    retry_delay_secs: delay before a failed message comes back (0: requeued at once).
    prefetch: unacked messages the broker may send (default: topology.max.spout.pending, else 1000).
    declare: declare the queue (durable, with `queue_arguments`), the retry and dead-letter queues.
    """

    broker_name = "RabbitMQ"

    def __init__(self, queue: str, url: str | None = None, *, host: str | None = None, port: int | None = None,
                 username: str | None = None, password: str | None = None, virtual_host: str | None = None,
                 scheme: Any = "string", fields: Any = ("message",), meta_field: str | None = None,
                 max_retries: int | None = None, retry_delay_secs: float = 1.0,
                 dead_letter_queue: str | None = None, retry_queue: str | None = None,
                 prefetch: int | None = None, declare: bool = True, queue_arguments: dict | None = None,
                 heartbeat_secs: int = 60, connect_timeout_secs: float = 10.0, max_deliveries: int | None = None):
        super().__init__(scheme, fields, meta_field, max_retries, retry_delay_secs, max_deliveries)
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

    def _source_name(self) -> str:
        return self.queue

    # -- driver side ----------------------------------------------------------------------

    def _connect(self) -> None:
        self._gen = 0  # the connection's number: a delivery tag means something on its own connection only
        self._conn: Any = None
        try:
            self._start_io(self.connect_timeout_secs * 3 + 5)
        except ValueError:
            raise
        except Exception as e:  # noqa: BLE001
            raise ConnectionError(f"cannot connect to RabbitMQ at {self.url} (queue {self.queue!r}): "
                                  f"{self._error_text(e)}") from None

    def _current(self, m: Message) -> bool:
        return m.handle[0] == self._gen

    def _dropped(self, n: int) -> None:
        self.counters.stale += n  # from a connection that is gone: RabbitMQ redelivers them

    def _wake(self) -> bool:
        conn = self._conn
        if conn is None:
            return False  # (re)connecting: the I/O thread runs the actions once connected
        try:
            conn.add_callback_threadsafe(self._run_actions)
        except Exception:  # noqa: BLE001 - the connection is going away; the I/O thread drains later
            return False
        return True

    def _meta(self, m: Message) -> dict[str, Any]:
        return {"id": m.id, "attempts": m.attempts, "source": self.queue, "redelivered": m.handle[3],
                "headers": dict(m.headers or {})}

    def deactivate(self) -> None:
        """Stop consuming: cancel the consumer (pika requeues what it had not dispatched) and
        give back what the spout had not emitted; trees in flight finish as usual."""
        self._active = False
        self._act(("pause", None, None))

    def activate(self) -> None:
        self._active = True
        self._act(("resume", None, None))

    def _disconnect(self) -> None:
        self._stop_io(self.connect_timeout_secs + 10)

    # -- the I/O thread -------------------------------------------------------------------

    def _io_connect(self) -> None:
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
        except Exception:
            _close_quietly(conn)
            raise
        self._ch, self._pub = ch, pub
        self._gen += 1
        self._tags = DeliveryTags()  # a new channel numbers its deliveries from 1
        self._consumer_tag = None
        self._conn = conn
        if self._active:
            self._consume()
        log.info("%s[%d]: consuming %r from %s", self.component_id, self.task_index, self.queue, self.url)

    def _io_serve(self) -> None:
        self._run_actions()  # what was handed over while there was no connection
        while not self._closing:
            self._conn.process_data_events(time_limit=0.1)
            if self._actions and not self._scheduled:
                self._run_actions()
        self._run_actions()  # closing: the last acks

    def _io_close(self) -> None:
        conn, self._conn = self._conn, None
        _close_quietly(conn)  # what is not acked goes back to the queue

    def _consume(self) -> None:
        gen, incoming, decode, tags = self._gen, self._incoming, self.decode, self._tags

        def on_delivery(_ch: Any, method: Any, props: Any, body: bytes) -> None:
            headers = props.headers or {}
            before = _int_header(headers, ATTEMPTS_HEADER)  # deliveries of the copies before this one
            attempts = before + _int_header(headers, "x-delivery-count") + 1  # a quorum queue's own count
            failures = _int_header(headers, FAILURES_HEADER) if FAILURES_HEADER in headers else before
            tag = method.delivery_tag
            tags.delivered(tag)
            m = Message((gen, tag), body, attempts, (gen, tag, props, method.redelivered), headers, failures)
            decode(m)
            incoming.append(m)

        self._consumer_tag = self._ch.basic_consume(self.queue, on_delivery, auto_ack=False)

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

    def _io_lost(self, error: BaseException) -> None:
        """The connection is gone: RabbitMQ requeues what this spout held; forget it, reconnect."""
        dropped = len(self._inflight) + len(self._incoming)
        self._incoming.clear()
        self._done.append((REPORT, f"RabbitMQ connection to {self.url} lost ({self._error_text(error)}); "
                                   f"{dropped} unacked message(s) go back to queue {self.queue!r}; reconnecting", None))

    def _run_actions(self) -> None:
        """On the I/O thread: the acks, retries, dead letters and pauses the spout handed over.
        The acks go out last, as few frames as the settled tags allow (see tags)."""
        self._scheduled = False
        actions, done, gen = self._actions, self._done, self._gen
        acks: list[Message] = []
        while actions:
            kind, m, failure = actions.popleft()
            if kind == "pause":
                self._pause()
                continue
            if kind == "resume":
                if self._consumer_tag is None and self._active:
                    self._consume()
                continue
            if m.handle[0] != gen:
                done.append((STALE, m, None))  # its connection is gone: RabbitMQ redelivers it
                continue
            if kind == "ack":
                acks.append(m)
            elif kind == "retry":
                headers = dict(m.headers or {})
                headers[ATTEMPTS_HEADER] = m.attempts
                headers[FAILURES_HEADER] = m.failures
                headers[REASON_HEADER] = failure.kind
                target = self.retry_queue if self.retry_delay_secs > 0 else self.queue
                self._republish(m, target, headers)
            else:
                headers = dict(m.headers or {})
                headers.pop(REASON_HEADER, None)
                headers.update(failure.fields(self.queue, m.handle[1]))
                if self._republish(m, self.dead_letter_queue, headers):
                    done.append((DEAD, m, failure))
        if acks:
            self._ack(acks)

    def _ack(self, acks: list[Message]) -> None:
        """basic.ack these deliveries: one multiple ack for those the settled tags allow, the
        rest one by one."""
        multiple, singles = self._tags.plan_acks([m.handle[1] for m in acks])
        if multiple is not None:
            self._ch.basic_ack(multiple, multiple=True)
        for tag in singles:
            self._ch.basic_ack(tag)
        self._done.append((ACKED, list(acks), None))

    def _pause(self) -> None:
        if self._consumer_tag is not None:
            self._ch.basic_cancel(self._consumer_tag)  # pika requeues what it had not dispatched
            self._consumer_tag = None
        while self._incoming:
            try:
                m = self._incoming.popleft()
            except IndexError:
                break
            if m.handle[0] == self._gen:
                self._ch.basic_nack(m.handle[1], requeue=True)
                self._tags.settled(m.handle[1])

    def _republish(self, m: Message, routing_key: str, headers: dict) -> bool:
        """Publish a copy of `m` (confirmed), then ack the original; False if the copy was refused."""
        props = copy.copy(m.handle[2])
        props.headers = headers
        if not props.delivery_mode:  # a number: pika converts its enum only in the constructor
            props.delivery_mode = pika.DeliveryMode.Persistent.value
        tag = m.handle[1]
        try:
            self._pub.basic_publish("", routing_key, m.body, props, mandatory=True)
        except (pika.exceptions.UnroutableError, pika.exceptions.NackError) as e:
            self._done.append((REPORT, f"RabbitMQ refused the copy of message {tag} for {routing_key!r} "
                                       f"({type(e).__name__}); requeued it as it is", None))
            self._ch.basic_nack(tag, requeue=True)
            self._tags.settled(tag)
            return False
        self._ch.basic_ack(tag)  # if this fails the copy is stored and the original comes back: at least once
        self._tags.settled(tag)
        return True


class RabbitMQColumnSpout(ColumnSpoutMixin, RabbitMQSpout):
    """RabbitMQSpout for columnar topologies: what it has received goes out as one Arrow batch
    (column "value", utf8 or binary) per call, each message its own tree, acked, retried and
    dead-lettered as with RabbitMQSpout (see squall.connectors.column_spout)."""


def _close_quietly(conn: Any) -> None:
    if conn is None:
        return
    try:
        if conn.is_open:
            conn.close()
    except Exception:  # noqa: BLE001 - closing a broken connection may fail; nothing to do
        pass
