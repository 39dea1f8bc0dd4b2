"""RedisStreamSpout: a reliable spout over a Redis stream with a consumer group (redis-py).

The spout reads new entries with `XREADGROUP` (they stay in the group's pending entries list
until acked) and emits each with its entry id as msg id. When the tree is acked the entry is
`XACK`ed (acks are batched: sent at the start of the next `next_tuple`, on deactivate and on
close). When it fails it stays pending and is claimed back (`XCLAIM`) after
`retry_delay_secs`; the attempt number is the entry's delivery count, which Redis increments on
every delivery and claim. After `max_retries` retries, or when it does not decode, it is added
to the dead-letter stream `<stream>:dlq` (its fields plus `squall-*` fields: reason, error,
attempts, ...) and acked, in one transaction.

Entries of a consumer that died stay pending in the group. Every `claim_interval_secs` each
spout task takes over, with `XAUTOCLAIM`, entries idle longer than `claim_idle_secs` (default:
the topology's message timeout); one delivered more than `max_retries + 1` times is
dead-lettered (reason "lost") instead of being tried again. Entries this spout still has in
flight for long are touched (`XCLAIM ... JUSTID`) so that no one else claims them.

Connection: `url` (redis://[user:password@]host:port/db, rediss:// for TLS), else `REDIS_URL`,
else `REDIS_HOST`, `REDIS_PORT`, `REDIS_USERNAME`, `REDIS_PASSWORD`, `REDIS_DB`; default
redis://127.0.0.1:6379/0. The password is never logged.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from typing import Any
from urllib.parse import quote

import redis
import redis.exceptions

from squall.connectors.base import (
    BrokerSpout,
    Failure,
    Message,
    Secret,
    env_first,
    redact_url,
    scrub,
    url_password,
)

log = logging.getLogger("squall.connectors")

ACK_FLUSH_AT = 1000  # acks buffered before they are sent without waiting for next_tuple
CLAIM_COUNT = 500
READ_BLOCK_MS = 100  # the reader thread's XREADGROUP BLOCK
ROOM_WAIT_SECS = 0.003  # the reader's pause while the spout holds all it may
RECONNECT_MIN_SECS = 0.2
RECONNECT_MAX_SECS = 10.0

_LOST = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def redis_url(url: str | None = None, host: str | None = None, port: int | None = None,
              username: str | None = None, password: str | None = None, db: int | None = None) -> Secret:
    """The Redis URL from the arguments, else the environment, else the local default."""
    url = url or env_first("REDIS_URL")
    if url:
        return Secret(url)
    host = host or env_first("REDIS_HOST", default="127.0.0.1")
    port = int(port or env_first("REDIS_PORT", default="6379"))
    user = username or env_first("REDIS_USERNAME", "REDIS_USER", default="")
    pw = password or env_first("REDIS_PASSWORD", default="")
    db = int(db if db is not None else env_first("REDIS_DB", default="0"))
    auth = ""
    if pw:
        auth = f"{quote(user, safe='')}:{quote(pw, safe='')}@"
    elif user:
        auth = f"{quote(user, safe='')}@"
    return Secret(f"redis://{auth}{host}:{port}/{db}")


def _s(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


class RedisStreamSpout(BrokerSpout):
    """A reliable spout over the Redis stream `stream`, consumer group `group`; see the module
    docstring.

    payload_field: the entry field holding the payload (decoded by `scheme`).
    consumer: this task's consumer name (default: unique per process and task).
    start_id: where a new group starts: "0" (the whole stream) or "$" (only new entries).
    batch_size: entries read per XREADGROUP; claim_idle_secs / claim_interval_secs: see above.
    """

    def __init__(self, stream: str, group: str = "squall", url: str | None = None, *, host: str | None = None,
                 port: int | None = None, username: str | None = None, password: str | None = None,
                 db: int | None = None, consumer: str | None = None, payload_field: str = "payload",
                 scheme: Any = "string", fields: Any = ("message",), meta_field: str | None = None,
                 max_retries: int | None = None, retry_delay_secs: float = 1.0,
                 dead_letter_stream: str | None = None, start_id: str = "0", batch_size: int = 500,
                 claim_idle_secs: float | None = None, claim_interval_secs: float | None = None,
                 socket_timeout_secs: float = 5.0):
        super().__init__(scheme, fields, meta_field, max_retries, retry_delay_secs)
        self.stream = stream
        self.group = group
        self._url = redis_url(url, host, port, username, password, db)
        self.url = redact_url(self._url.reveal())
        self.consumer = consumer
        self.payload_field = payload_field
        self.dead_letter_stream = dead_letter_stream or f"{stream}:dlq"
        self.start_id = start_id
        self.batch_size = int(batch_size)
        self.claim_idle_secs = claim_idle_secs
        self.claim_interval_secs = claim_interval_secs
        self.socket_timeout_secs = socket_timeout_secs
        self._r: Any = None

    def _source_name(self) -> str:
        return self.stream

    def _secrets(self) -> list[Any]:
        return [self._url, url_password(self._url.reveal())]

    # -- connection -----------------------------------------------------------------------

    def _connect(self) -> None:
        if not self.consumer:
            self.consumer = f"{socket.gethostname()}-{os.getpid()}-{self.task_index}-{uuid.uuid4().hex[:6]}"
        self._idle_ms = int(1000 * (self.claim_idle_secs if self.claim_idle_secs is not None
                                    else self.message_timeout_secs))
        interval = self.claim_interval_secs
        self._claim_every = interval if interval is not None else min(5.0, max(0.05, self._idle_ms / 4000))
        self._buffer: deque[Message] = deque()
        self._to_ack: list[Message] = []
        self._ack_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._recover_pending = False
        self._acks_since = 0.0  # when the oldest ack in _to_ack came
        self._retry_heap: list[tuple[float, int, Message]] = []
        self._seq = itertools.count()
        self._next_claim = 0.0  # claim at once: pick up what a dead consumer left
        self._down_until = 0.0
        self._backoff = RECONNECT_MIN_SECS
        self._field = self.payload_field.encode()
        try:
            self._r = redis.Redis.from_url(self._url.reveal(), socket_timeout=self.socket_timeout_secs,
                                           socket_connect_timeout=self.socket_timeout_secs,
                                           client_name=f"squall-{self.component_id}-{self.task_index}")
            try:
                self._r.xgroup_create(self.stream, self.group, id=self.start_id, mkstream=True)
            except redis.exceptions.ResponseError as e:
                if "BUSYGROUP" not in str(e):
                    raise
        except Exception as e:  # noqa: BLE001
            raise ConnectionError(f"cannot open consumer group {self.group!r} on Redis stream {self.stream!r} at "
                                  f"{self.url}: {scrub(_describe(e), self._secrets())}") from None
        self._stop = threading.Event()
        self._io = threading.Thread(target=self._io_main, daemon=True,
                                    name=f"squall-redis-{self.component_id}-{self.task_index}")
        self._io.start()
        log.info("%s[%d]: consuming stream %r group %r as %r from %s", self.component_id, self.task_index,
                 self.stream, self.group, self.consumer, self.url)

    def _trouble(self, error: BaseException) -> None:
        """Redis is unreachable: keep every entry as it is (ids stay valid), try again later."""
        now = time.monotonic()
        self._down_until = now + self._backoff
        self._report_later(f"Redis at {self.url} unreachable ({scrub(_describe(error), self._secrets())}); "
                           f"retrying in {self._backoff:.1f}s")
        self._backoff = min(RECONNECT_MAX_SECS, self._backoff * 2)

    def _ok(self) -> None:
        if self._backoff != RECONNECT_MIN_SECS:
            self.counters.reconnects += 1
            self._backoff = RECONNECT_MIN_SECS

    def _disconnect(self) -> None:
        if self._r is None:
            return
        self._stop.set()
        self._io.join(self.socket_timeout_secs + 5)
        try:
            self._flush_acks()
        finally:
            try:
                self._r.close()
            except Exception:  # noqa: BLE001
                pass
            self._r = None

    def deactivate(self) -> None:
        self._flush_acks()

    # -- reading --------------------------------------------------------------------------

    def _next_message(self) -> Message | None:
        now = time.monotonic()
        if now < self._down_until:
            return None
        try:
            if self._to_ack:
                self._flush_acks(raise_lost=True)
            if now >= self._next_claim:
                self._next_claim = now + self._claim_every
                self._claim_dead()
            if self._retry_heap and self._retry_heap[0][0] <= now:
                self._claim_due_retries(now)
            if self._recover_pending:
                self._recover_pending = False
                self._recover()
        except _LOST as e:
            self._recover_pending = True
            self._trouble(e)
            return None
        self._ok()
        return self._buffer.popleft() if self._buffer else None

    def _room(self) -> int:
        return min(self.batch_size, self._prefetch() - len(self._inflight) - len(self._buffer))

    def _message(self, eid: Any, fields: dict | None, attempts: int) -> Message:
        eid = _s(eid)
        fields = fields or {}
        body = fields.get(self._field)
        m = Message(eid, body, attempts, handle=fields)
        return m

    def _claim_due_retries(self, now: float) -> None:
        due: list[Message] = []
        while self._retry_heap and self._retry_heap[0][0] <= now and len(due) < CLAIM_COUNT:
            due.append(heapq.heappop(self._retry_heap)[2])
        try:
            claimed = self._r.xclaim(self.stream, self.group, self.consumer, 0, [m.id for m in due])
        except _LOST:
            for m in due:  # still pending and ours: try again later
                heapq.heappush(self._retry_heap, (now, next(self._seq), m))
            raise
        got = {_s(eid): fields for eid, fields in claimed or () if fields is not None}
        for m in due:
            fields = got.get(m.id)
            if fields is None:
                self.counters.extra["vanished"] = self.counters.extra.get("vanished", 0) + 1
                continue  # deleted from the stream meanwhile (XDEL / trimming): nothing to retry
            self._buffer.append(self._message(m.id, fields, m.attempts + 1))  # XCLAIM counted a delivery

    def _recover(self) -> None:
        """After a connection error: entries Redis delivered to this consumer whose reply was lost
        are pending for it but unknown to the spout. Take them back now (XCLAIM to itself)
        rather than wait for claim_idle. The reader holds _read_lock from its XREADGROUP until
        the entries are in the buffer, so an entry pending here is known or truly lost."""
        with self._read_lock:
            rows = self._r.xpending_range(self.stream, self.group, min="-", max="+",
                                          count=self._prefetch() + len(self._retry_heap) + 1000,
                                          consumername=self.consumer)
            known = self._known()
            with self._ack_lock:
                known.update(m.id for m in self._to_ack)
        lost = {_s(r["message_id"]): int(r["times_delivered"]) for r in rows}
        for eid in known:
            lost.pop(eid, None)
        if not lost:
            return
        claimed = self._r.xclaim(self.stream, self.group, self.consumer, 0, list(lost))
        for eid, fields in claimed or ():
            if fields is not None:
                eid = _s(eid)
                self._buffer.append(self._message(eid, fields, lost[eid] + 1))  # XCLAIM counted a delivery
        self.counters.extra["recovered"] = self.counters.extra.get("recovered", 0) + len(lost)

    def _known(self) -> set[str]:
        ids = set(self._inflight)
        ids.update(m.id for m in list(self._buffer))
        ids.update(e[2].id for e in self._retry_heap)
        return ids

    def _claim_dead(self) -> None:
        """Take over entries idle longer than claim_idle (their consumer is gone)."""
        cursor = "0-0"
        known: set[str] | None = None
        for _ in range(10):  # at most 10 * CLAIM_COUNT entries per claim tick, and only what fits
            room = min(CLAIM_COUNT, self._prefetch() - len(self._inflight) - len(self._buffer))
            if room <= 0:
                break
            res = self._r.xautoclaim(self.stream, self.group, self.consumer, self._idle_ms, cursor, count=room)
            cursor, entries = _s(res[0]), res[1]
            fresh = [(_s(eid), fields) for eid, fields in entries if fields is not None]
            if fresh:
                known = self._known() if known is None else known
                fresh = [(eid, f) for eid, f in fresh if eid not in known]
            if fresh:
                counts = self._delivery_counts([eid for eid, _ in fresh])
                for eid, fields in fresh:
                    m = self._message(eid, fields, counts.get(eid, 2))
                    self.counters.extra["claimed"] = self.counters.extra.get("claimed", 0) + 1
                    if m.attempts > self.max_retries + 1:
                        self._dead_letter(m, Failure("lost", f"delivered {m.attempts - 1} times without an ack "
                                                             f"(its consumer died or timed out)", m.attempts))
                    else:
                        self._buffer.append(m)
            if cursor == "0-0":
                break

    def _delivery_counts(self, ids: list[str]) -> dict[str, int]:
        lo, hi = min(ids, key=_id_key), max(ids, key=_id_key)
        rows = self._r.xpending_range(self.stream, self.group, min=lo, max=hi, count=len(ids) + 1000,
                                      consumername=self.consumer)
        return {_s(r["message_id"]): int(r["times_delivered"]) for r in rows}

    def _io_main(self) -> None:
        """The reader thread, with its own connection: reads new entries (XREADGROUP with a short
        BLOCK) and decodes them into the buffer while the topology works, never holding more than
        max.spout.pending; and resets the idle time of entries in flight for a third of
        claim_idle (XCLAIM ... JUSTID to this consumer), so that no one else claims them while
        their trees still run, even when next_tuple is not called (at max.spout.pending)."""
        touch_every = max(0.05, self._idle_ms / 4000)
        touch_limit = self._idle_ms / 3000
        next_touch = time.monotonic() + touch_every
        backoff = RECONNECT_MIN_SECS
        r = None
        streams = {self.stream: ">"}
        while not self._stop.is_set():
            try:
                if r is None:
                    r = redis.Redis.from_url(self._url.reveal(), socket_timeout=self.socket_timeout_secs,
                                             socket_connect_timeout=self.socket_timeout_secs)
                now = time.monotonic()
                if now >= next_touch:
                    next_touch = now + touch_every
                    self._touch(r, now, touch_limit)
                    if self._to_ack and now - self._acks_since > touch_every:
                        self._flush_acks()  # next_tuple is not being called (deactivated?): ack anyway
                room = self._room()
                if room <= 0:
                    self._stop.wait(ROOM_WAIT_SECS)
                    continue
                with self._read_lock:  # see _recover
                    res = r.xreadgroup(self.group, self.consumer, streams, count=room, block=READ_BLOCK_MS)
                    for _stream, entries in res or ():
                        for eid, fields in entries:
                            m = self._message(eid, fields, 1)
                            self.decode(m)
                            self._buffer.append(m)
                backoff = RECONNECT_MIN_SECS
            except Exception as e:  # noqa: BLE001 - report, back off, go on
                self._recover_pending = True  # the reply of a read may have been lost with the connection
                self._report_later(f"reading Redis stream {self.stream!r} at {self.url} failed "
                                   f"({scrub(_describe(e), self._secrets())}); retrying in {backoff:.1f}s")
                if r is not None:
                    r.close()
                    r = None
                self._stop.wait(backoff)
                backoff = min(RECONNECT_MAX_SECS, backoff * 2)
        if r is not None:
            r.close()

    def _touch(self, r: Any, now: float, limit: float) -> None:
        try:
            ids = [m.id for m in list(self._inflight.values()) if now - m.emitted_at > limit]
        except RuntimeError:  # the dict changed while copied: next round
            return
        for i in range(0, len(ids), CLAIM_COUNT):
            r.xclaim(self.stream, self.group, self.consumer, 0, ids[i:i + CLAIM_COUNT], justid=True)
        if ids:
            self.counters.extra["touched"] = self.counters.extra.get("touched", 0) + len(ids)

    # -- acks, retries, dead letters ----------------------------------------------------------

    def _ack_message(self, m: Message) -> None:
        with self._ack_lock:
            if not self._to_ack:
                self._acks_since = time.monotonic()
            self._to_ack.append(m)
        if len(self._to_ack) >= ACK_FLUSH_AT:
            self._flush_acks()

    def _flush_acks(self, raise_lost: bool = False) -> None:
        """XACK what was acked. Usually on the wave's thread; deactivate (called from elsewhere)
        and the reader thread (for acks waiting long, e.g. while deactivated) flush too: hence
        the lock."""
        with self._ack_lock:
            self._flush_acks_locked(raise_lost)

    def _flush_acks_locked(self, raise_lost: bool) -> None:
        while self._to_ack and self._r is not None:
            chunk = self._to_ack[:ACK_FLUSH_AT]
            try:
                self._r.xack(self.stream, self.group, *[m.id for m in chunk])
            except _LOST as e:
                if raise_lost:
                    raise
                self._trouble(e)
                return
            del self._to_ack[:len(chunk)]
            for m in chunk:
                self._acked(m)

    def _retry_message(self, m: Message, failure: Failure) -> None:
        heapq.heappush(self._retry_heap, (time.monotonic() + self.retry_delay_secs, next(self._seq), m))

    def _dead_letter(self, m: Message, failure: Failure) -> None:
        fields = {k: v for k, v in (m.handle or {}).items()}
        fields.update({k.encode(): v.encode() for k, v in failure.fields(self.stream, m.id).items()})
        try:
            pipe = self._r.pipeline(transaction=True)
            pipe.xadd(self.dead_letter_stream, fields)
            pipe.xack(self.stream, self.group, m.id)
            pipe.execute()
        except _LOST as e:
            # Still pending at the source: claimed again later, and dead-lettered then.
            self._trouble(e)
            return
        self._dead_lettered(m, failure)

    def _meta(self, m: Message) -> dict[str, Any]:
        return {"id": m.id, "attempts": m.attempts, "source": self.stream,
                "fields": {_s(k): _s(v) for k, v in (m.handle or {}).items() if k != self._field}}

    def _no_payload(self, m: Message) -> str:
        names = sorted(_s(k) for k in (m.handle or {}))
        return f"entry has no field {self.payload_field!r} (its fields: {names})"


def _id_key(eid: str) -> tuple[int, int]:
    ms, _, seq = eid.partition("-")
    return int(ms), int(seq or 0)


def _describe(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
