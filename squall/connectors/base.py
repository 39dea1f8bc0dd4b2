"""What the broker spouts share: payload schemes, retry and dead-letter bookkeeping, connection
settings from arguments or environment variables, and password redaction.

The model is Storm's reliable queue spout. A spout takes a message off the broker without
removing it, emits it with the broker's id as msg id, and when the tuple tree is acked it acks
the message at the broker; when the tree fails the message is retried, and after `max_retries`
retries it goes to a dead-letter target on the same broker with the reason, and is acked at the
source. A payload that the declared scheme cannot decode is never emitted: it goes straight to
the dead-letter target with a `decode` reason. Payloads are never unpickled.

A message is attempted at most `max_retries + 1` times: attempt 1 is the first delivery, and
the failure of attempt `max_retries + 1` dead-letters it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from squall.api.components import Spout

log = logging.getLogger("squall.connectors")

SCHEMES = ("string", "json", "bytes")
MAX_ERROR_CHARS = 2000
PREVIEW_BYTES = 40
MAX_BAD_PER_CALL = 256  # undecodable messages dead-lettered in one next_tuple call, at most
MAX_RETRIES_KEY = "squall.max.replays"  # Config.SQUALL_MAX_REPLAYS: the default of max_retries

# Dead-letter metadata, as message headers (RabbitMQ, NATS) or entry fields (Redis).
DL_REASON = "squall-reason"  # decode | error | failed | timeout | lost
DL_ERROR = "squall-error"  # the error text (one line, at most MAX_ERROR_CHARS)
DL_ATTEMPTS = "squall-attempts"  # deliveries the message had, the last one included
DL_COMPONENT = "squall-component"  # where the tree failed, when known
DL_TASK = "squall-task"
DL_SOURCE = "squall-source"  # the queue / stream the message came from
DL_SOURCE_ID = "squall-source-id"  # its id there (delivery tag, entry id, stream sequence)
DL_FAILED_AT = "squall-failed-at"  # unix time, seconds


# -- schemes ----------------------------------------------------------------------------------


class DecodeError(ValueError):
    """A payload the spout's scheme cannot decode; the message says why, in one line."""


def _preview(payload: bytes) -> str:
    head = bytes(payload[:PREVIEW_BYTES])
    return repr(head) + ("..." if len(payload) > PREVIEW_BYTES else "")


def _decode_string(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError(f"payload is not valid UTF-8 ({e.reason} at byte {e.start}): {_preview(payload)}") from None


def _decode_json(payload: bytes) -> Any:
    text = _decode_string(payload)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DecodeError(f"payload is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}): "
                          f"{_preview(payload)}") from None


def _decode_bytes(payload: bytes) -> bytes:
    return bytes(payload)


_BUILTIN: dict[str, Callable[[bytes], Any]] = {"string": _decode_string, "json": _decode_json, "bytes": _decode_bytes}


class Scheme:
    """Turns a payload (bytes) into the value the spout emits.

    `scheme` is "string" (UTF-8 text), "json" (UTF-8 JSON, any JSON value) or "bytes" (as is),
    or a callable bytes -> value; whatever it raises becomes a DecodeError.
    """

    def __init__(self, scheme: str | Callable[[bytes], Any] = "string"):
        if callable(scheme):
            self.name = getattr(scheme, "__name__", type(scheme).__name__)
            self._fn = scheme
            self._custom = True
        elif scheme in _BUILTIN:
            self.name = scheme
            self._fn = _BUILTIN[scheme]
            self._custom = False
        else:
            raise ValueError(f"unknown scheme {scheme!r}: use one of {SCHEMES} or a callable bytes -> value")

    def decode(self, payload: bytes) -> Any:
        if not self._custom:
            return self._fn(payload)
        try:
            return self._fn(payload)
        except DecodeError:
            raise
        except Exception as e:  # noqa: BLE001 - a user scheme's error is a decode failure
            raise DecodeError(f"scheme {self.name} cannot decode payload ({type(e).__name__}: {e}): "
                              f"{_preview(payload)}") from None

    def __repr__(self) -> str:
        return f"Scheme({self.name!r})"


# -- failures and dead letters ----------------------------------------------------------------


def one_line(text: Any, limit: int = MAX_ERROR_CHARS) -> str:
    """Text fit for a header: one line, printable, at most `limit` characters."""
    s = " | ".join(part.strip() for part in str(text).splitlines() if part.strip())
    s = "".join(ch if ch.isprintable() else "?" for ch in s)
    return s if len(s) <= limit else s[: limit - 3] + "..."


@dataclass(frozen=True)
class Failure:
    """Why a message is dead-lettered: the kind (decode, error, failed, timeout, lost), the error
    text, where the tree failed (component and task, when known) and how many deliveries it had."""

    kind: str
    error: str | None = None
    attempts: int = 1
    component: str | None = None
    task: int | None = None

    @classmethod
    def from_reason(cls, reason: Any, attempts: int) -> Failure:
        """From a squall.FailReason (or None: a plain fail)."""
        if reason is None:
            return cls("failed", None, attempts)
        return cls(getattr(reason, "kind", None) or "failed", getattr(reason, "error", None), attempts,
                   getattr(reason, "component", None), getattr(reason, "task", None))

    def fields(self, source: str, source_id: Any) -> dict[str, str]:
        """The dead-letter metadata, as str -> str (headers or stream fields)."""
        out = {DL_REASON: self.kind, DL_ATTEMPTS: str(self.attempts), DL_SOURCE: str(source),
               DL_SOURCE_ID: str(source_id), DL_FAILED_AT: f"{time.time():.3f}"}
        if self.error:
            out[DL_ERROR] = one_line(self.error)
        if self.component is not None:
            out[DL_COMPONENT] = str(self.component)
        if self.task is not None:
            out[DL_TASK] = str(self.task)
        return out

    def __str__(self) -> str:
        where = f" in {self.component}[{self.task}]" if self.component is not None else ""
        err = f": {self.error}" if self.error else ""
        return f"{self.kind}{where} after {self.attempts} attempt(s){err}"


def dead_letter_info(fields: dict[Any, Any]) -> dict[str, str]:
    """The squall-* metadata of a dead letter (headers or fields, str or bytes), str -> str."""
    out = {}
    for k, v in (fields or {}).items():
        k = k.decode() if isinstance(k, bytes) else str(k)
        if k.lower().startswith("squall-"):
            out[k.lower()] = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    return out


class Message:
    """One message taken from a broker: its id there, payload, which delivery this is (1 = the
    first) and the broker's own handle for acking it."""

    __slots__ = ("id", "body", "attempts", "handle", "headers", "emitted_at", "touched_at", "value", "decoded",
                 "error")

    def __init__(self, id: Any, body: bytes, attempts: int = 1, handle: Any = None,  # noqa: A002
                 headers: dict | None = None):
        self.id = id
        self.body = body
        self.attempts = attempts
        self.handle = handle
        self.headers = headers
        self.emitted_at = 0.0
        self.touched_at = 0.0
        self.value: Any = None
        self.decoded = False
        self.error: str | None = None  # why the payload does not decode

    def __repr__(self) -> str:
        return f"Message(id={self.id!r}, attempts={self.attempts}, body={_preview(self.body or b'')})"


# -- connection settings ----------------------------------------------------------------------


class Secret:
    """A password or token: repr and str show `***`; `reveal()` gives the value to the client."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None):
        self._value = value

    def reveal(self) -> str | None:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "'***'" if self._value else "None"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def env_first(*names: str, default: str | None = None) -> str | None:
    """The first of these environment variables that is set and not empty."""
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return default


def redact_url(url: str | None) -> str:
    """The URL with its password (and any userinfo-only token) replaced by `***`."""
    if not url:
        return str(url)
    out = []
    for part in str(url).split(","):  # NATS takes comma-separated server lists
        try:
            u = urlsplit(part.strip())
        except ValueError:
            out.append("<unparseable url>")
            continue
        token_only = u.password is None and bool(u.username) and u.scheme.startswith(("nats", "tls", "ws"))
        if u.password is not None or token_only:
            host = u.hostname or ""
            if u.port:
                host = f"{host}:{u.port}"
            userinfo = "***" if token_only else f"{u.username or ''}:***"
            u = u._replace(netloc=f"{userinfo}@{host}")
        out.append(urlunsplit(u))
    return ",".join(out)


def url_password(url: str | None) -> str | None:
    if not url:
        return None
    try:
        pw = urlsplit(url).password
    except ValueError:
        return None
    return unquote(pw) if pw else None


def url_with_password(url: str, password: str | None) -> str:
    """Set the URL's password (keeping its user), for a password given apart from the URL."""
    if not password:
        return url
    u = urlsplit(url)
    host = u.hostname or ""
    if u.port:
        host = f"{host}:{u.port}"
    user = quote(unquote(u.username or ""), safe="")
    return urlunsplit(u._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def scrub(text: Any, secrets: Iterable[Secret | str | None]) -> str:
    """`text` with every secret (and its URL-quoted form) replaced by `***`."""
    s = str(text)
    for sec in secrets:
        v = sec.reveal() if isinstance(sec, Secret) else sec
        if v:
            for form in {v, quote(v, safe=""), quote(v)}:
                s = s.replace(form, "***")
    return s


# -- the shared spout -------------------------------------------------------------------------


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


class BrokerSpout(Spout):
    """The queue spout all three brokers share; a subclass talks to its broker.

    Emits `fields` (default `["message"]`): the decoded payload, and when `meta_field` is set,
    one more value: a dict with the message's broker id, `attempts` and broker details.

    Subclasses implement `_connect()`, `_next_message() -> Message | None`, `_ack_message(m)`,
    `_retry_message(m, failure)`, `_dead_letter(m, failure)` and `_disconnect()`; they call
    `_acked(m)` / `_dead_lettered(m, failure)` once the broker has taken the ack / dead letter.
    """

    def __init__(self, scheme: str | Callable[[bytes], Any] = "string", fields: Iterable[str] = ("message",),
                 meta_field: str | None = None, max_retries: int | None = None, retry_delay_secs: float = 1.0):
        self.scheme = Scheme(scheme)
        self.fields = list(fields)
        if len(self.fields) != 1:
            raise ValueError(f"fields must name the one payload field, got {self.fields}")
        self.meta_field = meta_field
        if max_retries is not None and max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.max_retries = max_retries
        if retry_delay_secs < 0:
            raise ValueError(f"retry_delay_secs must be >= 0, got {retry_delay_secs}")
        self.retry_delay_secs = float(retry_delay_secs)
        self._inflight: dict[Any, Message] = {}
        self._reports: deque[str] = deque()
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
        self.message_timeout_secs = float(conf.get("topology.message.timeout.secs") or 30)
        mp = conf.get("topology.max.spout.pending")
        self.max_spout_pending = int(mp) if mp else None
        self._inflight = {}
        self.counters = SpoutCounters()
        self._reports: deque[str] = deque()
        self._connect()

    def next_tuple(self) -> None:
        if self._reports:
            self._flush_reports()
        for _ in range(MAX_BAD_PER_CALL):
            m = self._next_message()
            if m is None:
                return
            if not m.decoded:
                self.decode(m)
            if m.error is not None:
                self.counters.decode_errors += 1
                self._report(f"message {m.id} from {self._source_name()} does not decode as {self.scheme.name}, "
                             f"sent to the dead letters: {m.error}")
                self._dead_letter(m, Failure("decode", m.error, m.attempts))
                continue
            now = time.monotonic()
            m.emitted_at = m.touched_at = now
            self._inflight[m.id] = m
            values = [m.value, self._meta(m)] if self.meta_field else [m.value]
            self._collector.emit(values, msg_id=m.id)
            self.counters.emitted += 1
            return

    def ack(self, msg_id: Any) -> None:
        m = self._inflight.pop(msg_id, None)
        if m is None:
            self.counters.stale += 1
            return
        self._ack_message(m)

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        m = self._inflight.pop(msg_id, None)
        if m is None:
            self.counters.stale += 1
            return
        self.counters.failed += 1
        failure = Failure.from_reason(reason, m.attempts)
        if m.attempts > self.max_retries:
            self._dead_letter(m, failure)
        else:
            self.counters.retried += 1
            self._retry_message(m, failure)

    def close(self) -> None:
        self._disconnect()
        if self._reports:
            self._flush_reports()

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

    # -- hooks: subclasses of a connector (and tests) may override these -------------------

    def on_acked(self, message: Message) -> None:
        """Called once the broker has taken the final ack of `message`. Normally on the thread
        that runs the topology's waves; a connector may call it from its own thread (Redis, for
        acks it sends while the spout is deactivated), so keep overrides thread-safe."""

    def on_dead_lettered(self, message: Message, failure: Failure) -> None:
        """Called once `message` is in the dead-letter target and acked at its source (same
        threads as on_acked)."""

    # -- for subclasses ---------------------------------------------------------------------

    def _acked(self, m: Message) -> None:
        self.counters.acked += 1
        self.on_acked(m)

    def _dead_lettered(self, m: Message, failure: Failure) -> None:
        self.counters.dead_lettered += 1
        log.warning("%s: dead-lettered %s from %s: %s", self.component_id, m.id, self._source_name(), failure)
        self.on_dead_lettered(m, failure)

    def _report_later(self, text: str) -> None:
        """Report from a connector's own thread: the collector is used on the wave's thread only."""
        self._reports.append(text)

    def _flush_reports(self) -> None:
        while self._reports:
            self._report(self._reports.popleft())

    def _report(self, error: BaseException | str) -> None:
        collector = getattr(self, "_collector", None)
        if collector is not None:
            try:
                collector.report_error(error)
                return
            except Exception:  # noqa: BLE001 - reporting must never take the spout down
                pass
        log.warning("%s: %s", getattr(self, "component_id", "spout"), error)

    def _meta(self, m: Message) -> dict[str, Any]:
        return {"id": m.id, "attempts": m.attempts, "source": self._source_name()}

    def _source_name(self) -> str:
        return "?"

    def _no_payload(self, m: Message) -> str:
        return "message has no payload"

    def _prefetch(self) -> int:
        """How many messages the spout may hold unacked: max.spout.pending, else a default."""
        return self.max_spout_pending or self.default_prefetch

    default_prefetch = 1000

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    # Do not show passwords: connectors keep them as Secret and their repr shows no URL secret.
    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._source_name()!r})"


class IOThreadBrokerSpout(BrokerSpout):
    """A BrokerSpout whose broker client lives in an I/O thread of its own: acks, retries and
    dead letters are queued as actions (`_act`, run by that thread), and what the thread has
    finished comes back through the `_done` deque, drained on the spout's own thread."""

    RETRY_ACTION = "retry"  # the action names the subclass's I/O thread understands
    DEAD_ACTION = "dead"

    def _act(self, item: tuple) -> None:
        raise NotImplementedError

    def ack(self, msg_id: Any) -> None:
        if self._done:
            self._finish_done()
        super().ack(msg_id)

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        if self._done:
            self._finish_done()
        super().fail(msg_id, reason=reason)

    def _ack_message(self, m: Message) -> None:
        self._act(("ack", m, None))

    def _retry_message(self, m: Message, failure: Failure) -> None:
        self._act((self.RETRY_ACTION, m, failure))

    def _dead_letter(self, m: Message, failure: Failure) -> None:
        self._act((self.DEAD_ACTION, m, failure))

    def _finish_done(self) -> None:
        done = self._done
        while done:
            kind, m, failure = done.popleft()
            if kind == "acked":
                self._acked(m)
            elif kind == "dead":
                self._dead_lettered(m, failure)
            else:
                self._other_done(kind, m)

    def _other_done(self, kind: str, m: Message) -> None:
        self._report(m)
