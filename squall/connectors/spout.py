"""The queue spout every broker connector is built on: what to emit, and what to do at the
broker when a tuple tree is acked or failed.

The model is Storm's reliable queue spout. A spout takes a message off the broker without
removing it, emits it with the broker's id as msg id, and when the tuple tree is acked it acks
the message at the broker; when the tree fails the message is retried, and after `max_retries`
retries it goes to a dead-letter target on the same broker with the reason, and is acked at the
source. A payload that the declared scheme cannot decode is never emitted: it goes straight to
the dead-letter target with a `decode` reason.

Two counts decide when a message has had its chances. Its *failures* are the trees the topology
failed (a bolt's fail, an error, a timeout): the message is dead-lettered when they exceed
`max_retries`. Its *deliveries* count every time the broker handed it out, also after a worker or
a consumer died with it: an infrastructure failure is not the message's fault, so it does not
use a retry, but a message delivered `max_deliveries` times without an ack is dead-lettered with
reason "lost" (a message that kills its worker each time would otherwise loop forever).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from squall.api.components import Spout
from squall.api.config import Config
from squall.connectors.dead_letters import Failure
from squall.connectors.schemes import DecodeError, Scheme, preview
from squall.connectors.settings import Secret, describe_error, url_password

log = logging.getLogger("squall.connectors")

MAX_BAD_PER_CALL = 256  # undecodable messages dead-lettered in one next_tuple call, at most
MAX_RETRIES_KEY = "squall.max.replays"  # Config.SQUALL_MAX_REPLAYS: the default of max_retries


class Message:
    """One message taken from a broker: its id there, payload, which delivery this is (1 = the
    first), how many of its trees the topology failed before, and the broker's own handle for
    acking it."""

    __slots__ = ("id", "body", "attempts", "failures", "handle", "headers", "emitted_at", "touched_at", "value",
                 "decoded", "error")

    def __init__(self, id: Any, body: bytes, attempts: int = 1, handle: Any = None,  # noqa: A002
                 headers: dict | None = None, failures: int = 0):
        self.id = id
        self.body = body
        self.attempts = attempts
        self.failures = failures
        self.handle = handle
        self.headers = headers
        self.emitted_at = 0.0
        self.touched_at = 0.0
        self.value: Any = None
        self.decoded = False
        self.error: str | None = None  # why the payload does not decode

    def __repr__(self) -> str:
        return (f"Message(id={self.id!r}, attempts={self.attempts}, failures={self.failures}, "
                f"body={preview(self.body or b'')})")


@dataclass
class SpoutCounters:
    emitted: int = 0
    acked: int = 0  # acks done at the broker (final acks)
    failed: int = 0  # trees failed (each later retried or dead-lettered)
    retried: int = 0
    dead_lettered: int = 0
    decode_errors: int = 0
    stale: int = 0  # ack/fail of a msg id the spout no longer holds (e.g. after a reconnect)
    reconnects: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, int]:
        d = {k: v for k, v in self.__dict__.items() if k != "extra"}
        d.update(self.extra)
        return d

    def add(self, name: str, n: int = 1) -> None:
        """Count something a connector of its own tracks (claimed, touched, ...) in `extra`."""
        self.extra[name] = self.extra.get(name, 0) + n


def default_max_deliveries(max_retries: int) -> int:
    """Deliveries a message may have before it counts as crash-looping: well above its retries,
    so that workers dying around a healthy message do not dead-letter it."""
    return max(10, 2 * (max_retries + 1))


class BrokerSpout(Spout):
    """The queue spout all three brokers share; a subclass talks to its broker.

    Emits `fields` (default `["message"]`): the decoded payload, and when `meta_field` is set,
    one more value: a dict with the message's broker id, `attempts` and broker details.

    Subclasses implement `_connect()`, `_next_message() -> Message | None`, `_ack_message(m)`,
    `_retry_message(m, failure)`, `_dead_letter(m, failure)` and `_disconnect()`; they call
    `_acked(m)` / `_dead_lettered(m, failure)` once the broker has taken the ack / dead letter.
    """

    _url: Secret | None = None  # the connection URL, for a connector that has one
    url = ""  # the URL to show: redacted
    default_prefetch = 1000
    # What the spout may hold received and not done, in max spout pendings. A connector that reads
    # ahead holds 2: as many in flight as the topology allows and as many again decoded and ready,
    # so a wave's acks free messages to emit at once, not room to read, decode and then emit
    # (Storm's KafkaSpout, too, bounds its polls apart from max spout pending). next_tuple still
    # emits no more than max spout pending.
    read_ahead = 1

    def __init__(self, scheme: str | Callable[[bytes], Any] = "string", fields: Iterable[str] = ("message",),
                 meta_field: str | None = None, max_retries: int | None = None, retry_delay_secs: float = 1.0,
                 max_deliveries: int | None = None):
        self.scheme = Scheme(scheme)
        self.fields = list(fields)
        if len(self.fields) != 1:
            raise ValueError(f"fields must name the one payload field, got {self.fields}")
        self.meta_field = meta_field
        if max_retries is not None and max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.max_retries = max_retries
        if max_deliveries is not None and max_deliveries < 1:
            raise ValueError(f"max_deliveries must be >= 1, got {max_deliveries}")
        self.max_deliveries = max_deliveries
        if retry_delay_secs < 0:
            raise ValueError(f"retry_delay_secs must be >= 0, got {retry_delay_secs}")
        self.retry_delay_secs = float(retry_delay_secs)
        self._inflight: dict[Any, Message] = {}
        self.counters = SpoutCounters()

    # -- Storm's spout interface ----------------------------------------------------------

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.fields + ([self.meta_field] if self.meta_field else []))

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self._collector = collector
        self._context = context
        self.task_index = getattr(context, "this_task_index", 0)
        self.component_id = getattr(context, "this_component_id", "spout")
        if self.max_retries is None:
            self.max_retries = int(conf.get(MAX_RETRIES_KEY, 5))
        if self.max_deliveries is None:
            deliveries = conf.get(Config.SQUALL_MAX_DELIVERIES)
            self.max_deliveries = int(deliveries or default_max_deliveries(self.max_retries))
        self.message_timeout_secs = float(conf.get("topology.message.timeout.secs") or 30)
        mp = conf.get("topology.max.spout.pending")
        self.max_spout_pending = int(mp) if mp else None
        self._inflight = {}
        self.counters = SpoutCounters()
        self._connect()

    def next_tuple(self) -> None:
        taken = self._take_decoded(1)
        if not taken:
            return
        m = taken[0]
        m.emitted_at = m.touched_at = time.monotonic()
        self._inflight[m.id] = m
        self._collector.emit(self._values(m), msg_id=m.id)
        self.counters.emitted += 1

    def _take_decoded(self, room: int) -> list[Message]:
        """Up to `room` decoded messages off the broker side; the undecodable ones met on the
        way are dead-lettered, at most MAX_BAD_PER_CALL a call (the column spouts take many)."""
        taken: list[Message] = []
        bad = 0
        while len(taken) < room and bad < MAX_BAD_PER_CALL:
            m = self._next_message()
            if m is None:
                break
            if not m.decoded:
                self.decode(m)
            if m.error is not None:
                self._undecodable(m)
                bad += 1
                continue
            taken.append(m)
        return taken

    def ack(self, msg_id: Any) -> None:
        m = self._inflight.pop(msg_id, None)
        if m is None:
            self.counters.stale += 1
            return
        self._ack_message(m)

    def ack_batch(self, msg_ids: list) -> None:
        """A wave's acks in one call (squall's Spout.ack_batch): handed to the broker side at
        once. (A subclass that overrides `ack` gets its `ack` called for each instead: see
        squall.engine.tasks.spout_task.settles_acks_in_batches.)"""
        pop = self._inflight.pop
        found = [m for m in map(pop, msg_ids, repeat(None)) if m is not None]
        self.counters.stale += len(msg_ids) - len(found)
        if found:
            self._ack_messages(found)

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        m = self._inflight.pop(msg_id, None)
        if m is None:
            self.counters.stale += 1
            return
        self._failed(m, reason)

    def _failed(self, m: Message, reason: Any) -> None:
        """`m`'s tree failed: retry it, or dead-letter it once it has had its retries (failures of
        the topology) or its deliveries (a worker died with it each time)."""
        self.counters.failed += 1
        failure = Failure.from_reason(reason, m.attempts)
        if failure.kind != "lost":  # "lost": the wave running it died, not the message's fault
            m.failures += 1
        # deliveries bound every message, also one whose failures a crash made the broker forget
        spent = m.failures > self.max_retries or m.attempts >= self.max_deliveries
        if spent:
            self._dead_letter(m, failure)
        else:
            self.counters.retried += 1
            self._retry_message(m, failure)

    def close(self) -> None:
        self._disconnect()

    def _undecodable(self, m: Message) -> None:
        """`m` does not decode by the scheme: reported, and dead-lettered at once (no retry)."""
        self.counters.decode_errors += 1
        self._report(f"message {m.id} from {self._source_name()} does not decode as {self.scheme.name}, "
                     f"sent to the dead letters: {m.error}")
        self._dead_letter(m, Failure("decode", m.error, m.attempts))

    def decode(self, m: Message) -> None:
        """Decode `m.body` by the scheme into `m.value`, or set `m.error` (safe on any thread:
        connectors decode on their I/O thread, off the wave's path)."""
        try:
            if m.body is None:
                raise DecodeError(self._no_payload(m))
            m.value = self.scheme.decode(m.body)
        except DecodeError as e:
            m.error = str(e)
        m.decoded = True

    def decode_many(self, ms: list[Message]) -> None:
        """`decode` for each of `ms`, in one pass while they all decode (and `decode` is ours)."""
        values = self.scheme.decode_all([m.body for m in ms]) if type(self).decode is BrokerSpout.decode else None
        if values is None:
            for m in ms:
                self.decode(m)
            return
        for m, v in zip(ms, values):
            m.value = v
            m.decoded = True

    # -- hooks: subclasses of a connector (and tests) may override these -------------------

    def on_acked(self, message: Message) -> None:
        """Called once the broker has taken the final ack of `message`, on the thread that runs
        the topology's waves (the one that calls ack and fail)."""

    def on_dead_lettered(self, message: Message, failure: Failure) -> None:
        """Called once `message` is in the dead-letter target and acked at its source (same
        thread as on_acked)."""

    # -- for subclasses ---------------------------------------------------------------------

    def _ack_messages(self, ms: list[Message]) -> None:
        """Ack these at the broker (a subclass may hand them over at once)."""
        for m in ms:
            self._ack_message(m)

    def _acked(self, m: Message) -> None:
        self.counters.acked += 1
        self.on_acked(m)

    def _acked_many(self, ms: list[Message]) -> None:
        """`_acked` for each of `ms`; the hook is called only where a subclass has one."""
        self.counters.acked += len(ms)
        if type(self).on_acked is not BrokerSpout.on_acked:
            for m in ms:
                self.on_acked(m)

    def _dead_lettered(self, m: Message, failure: Failure) -> None:
        self.counters.dead_lettered += 1
        log.warning("%s: dead-lettered %s from %s: %s", self.component_id, m.id, self._source_name(), failure)
        self.on_dead_lettered(m, failure)

    def _report(self, error: BaseException | str) -> None:
        collector = getattr(self, "_collector", None)
        if collector is not None:
            try:
                collector.report_error(error)
                return
            except Exception:  # noqa: BLE001 - reporting must never take the spout down
                pass
        log.warning("%s: %s", getattr(self, "component_id", "spout"), error)

    def _secrets(self) -> list[Any]:
        """Every secret this connector holds, to scrub from error texts."""
        if self._url is None:
            return []
        return [self._url, url_password(self._url.reveal())]

    def _error_text(self, error: BaseException) -> str:
        """The error as "Type: text", safe to show: without this connector's secrets."""
        return describe_error(error, self._secrets())

    def _values(self, m: Message) -> list[Any]:
        """The values emitted for `m`, in the order of declare_output_fields."""
        return [m.value, self._meta(m)] if self.meta_field else [m.value]

    def _meta(self, m: Message) -> dict[str, Any]:
        return {"id": m.id, "attempts": m.attempts, "source": self._source_name()}

    def _source_name(self) -> str:
        return "?"

    def _no_payload(self, m: Message) -> str:
        return "message has no payload"

    def _emit_room(self, most: int) -> int:
        """How many messages the spout may emit now: `most`, fewer as max spout pending nears (a
        spout may hold more received than it may have in flight: `read_ahead`)."""
        if self.max_spout_pending:
            return min(most, self.max_spout_pending - len(self._inflight))
        return most

    def _prefetch(self) -> int:
        """How many messages the spout may hold unacked: max.spout.pending, else a default."""
        return self.max_spout_pending or self.default_prefetch

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    # Do not show passwords: connectors keep them as Secret and their repr shows no URL secret.
    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._source_name()!r})"
