"""RedisStreamSpout: a reliable spout over a Redis stream with a consumer group (redis-py).

The spout reads new entries with `XREADGROUP` (they stay in the group's pending entries list
until acked) and emits each with its entry id as msg id. When the tree is acked the entry is
`XACK`ed (acks are batched). When it fails it stays pending and is claimed back (`XCLAIM`) after
`retry_delay_secs`. The attempt number is the entry's delivery count, which Redis increments on
every delivery and claim; the topology's failures of an entry are kept in the hash
`<stream>:<group>:failures` (written on a retry, removed with the ack), so that a spout that takes
the entry over after a crash knows them. After `max_retries` failures, or when it does not
decode, it is added to the dead-letter stream `<stream>:dlq` (its fields plus `squall-*` fields:
reason, error, attempts, ...) and acked, in one transaction.

Entries of a consumer that died stay pending in the group. Every `claim_interval_secs` each
spout task takes over, with `XAUTOCLAIM`, entries idle longer than `claim_idle_secs` (default:
the topology's message timeout); one delivered more than `max_deliveries` times is
dead-lettered (reason "lost") instead of being tried again. Entries this spout holds are
touched (`XCLAIM ... JUSTID`) every third of that time so that no one else claims them.

All of this runs on the spout's I/O thread, on a connection of its own (see `io_thread`): it
reads and decodes entries ahead while the topology works, holding at most twice
max.spout.pending (as many again as the topology may have in flight, ready to emit), and
sends the acks, claims and dead letters that the spout's ack/fail hand it. If Redis becomes
unreachable the thread reconnects with a backoff; entry ids stay valid, and entries whose read
reply was lost with the connection are taken back from the group's pending list.

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
import time
import uuid
from typing import Any

import redis
import redis.exceptions

from squall.connectors.dead_letters import Failure
from squall.connectors.io_thread import ACKED, DEAD, REPORT, IOThreadBrokerSpout
from squall.connectors.redis.connection import as_text, close_quietly, entry_id_key, redis_url
from squall.connectors.settings import redact_url
from squall.connectors.spout import Message

log = logging.getLogger("squall.connectors")

ACK_CHUNK = 1000  # entry ids per XACK
CLAIM_COUNT = 500
READ_BLOCK_MS = 100  # XREADGROUP BLOCK while no tree is in flight
ACK_WAIT_MS = 10  # ... while trees are in flight: their acks wait no longer than this
ROOM_WAIT_SECS = 0.003  # the I/O thread's pause while the spout holds all it may


class RedisStreamSpout(IOThreadBrokerSpout):
    """A reliable spout over the Redis stream `stream`, consumer group `group`; see the module
    docstring.

    payload_field: the entry field holding the payload (decoded by `scheme`).
    consumer: this task's consumer name (default: unique per process and task).
    start_id: where a new group starts: "0" (the whole stream) or "$" (only new entries).
    batch_size: at most this many entries per XREADGROUP (default: as many as the spout has room
    for, so that a wave finds them all); claim_idle_secs / claim_interval_secs: see above.
    """

    broker_name = "Redis"
    read_ahead = 2

    def __init__(self, stream: str, group: str = "squall", url: str | None = None, *, host: str | None = None,
                 port: int | None = None, username: str | None = None, password: str | None = None,
                 db: int | None = None, consumer: str | None = None, payload_field: str = "payload",
                 scheme: Any = "string", fields: Any = ("message",), meta_field: str | None = None,
                 max_retries: int | None = None, retry_delay_secs: float = 1.0,
                 dead_letter_stream: str | None = None, start_id: str = "0", batch_size: int | None = None,
                 claim_idle_secs: float | None = None, claim_interval_secs: float | None = None,
                 socket_timeout_secs: float = 5.0, max_deliveries: int | None = None):
        super().__init__(scheme, fields, meta_field, max_retries, retry_delay_secs, max_deliveries)
        self.stream = stream
        self.group = group
        self.failures_key = f"{stream}:{group}:failures"
        self._url = redis_url(url, host, port, username, password, db)
        self.url = redact_url(self._url.reveal())
        self.consumer = consumer
        self.payload_field = payload_field
        self.dead_letter_stream = dead_letter_stream or f"{stream}:dlq"
        self.start_id = start_id
        self.batch_size = int(batch_size) if batch_size else None
        self.claim_idle_secs = claim_idle_secs
        self.claim_interval_secs = claim_interval_secs
        self.socket_timeout_secs = socket_timeout_secs
        self._r: Any = None

    def _source_name(self) -> str:
        return self.stream

    # -- the spout's side -----------------------------------------------------------------

    def _connect(self) -> None:
        if not self.consumer:
            self.consumer = f"{socket.gethostname()}-{os.getpid()}-{self.task_index}-{uuid.uuid4().hex[:6]}"
        self._idle_ms = int(1000 * (self.claim_idle_secs if self.claim_idle_secs is not None
                                    else self.message_timeout_secs))
        interval = self.claim_interval_secs
        self._claim_every = interval if interval is not None else min(5.0, max(0.05, self._idle_ms / 4000))
        self._field = self.payload_field.encode()
        # The I/O thread's own bookkeeping (no other thread touches it):
        self._held: dict[str, Message] = {}  # entries this consumer took and has not acked or dead-lettered
        self._to_ack: list[Message] = []
        self._to_dead: list[tuple[Message, Failure]] = []
        self._unsure: set[str] = set()  # dead letters whose transaction's reply was lost with the connection
        self._retry_heap: list[tuple[float, int, Message]] = []  # (due, seq, message)
        self._seq = itertools.count()
        self._next_claim = 0.0  # claim at once: pick up what a dead consumer left
        self._recover_pending = False
        try:
            self._start_io(self.socket_timeout_secs * 3 + 5)
        except Exception as e:  # noqa: BLE001
            raise ConnectionError(f"cannot open consumer group {self.group!r} on Redis stream {self.stream!r} at "
                                  f"{self.url}: {self._error_text(e)}") from None
        log.info("%s[%d]: consuming stream %r group %r as %r from %s", self.component_id, self.task_index,
                 self.stream, self.group, self.consumer, self.url)

    def _disconnect(self) -> None:
        self._stop_io(self.socket_timeout_secs + 5)

    def _meta(self, m: Message) -> dict[str, Any]:
        return {"id": m.id, "attempts": m.attempts, "source": self.stream,
                "fields": {as_text(k): as_text(v) for k, v in (m.handle or {}).items() if k != self._field}}

    def _no_payload(self, m: Message) -> str:
        names = sorted(as_text(k) for k in (m.handle or {}))
        return f"entry has no field {self.payload_field!r} (its fields: {names})"

    # -- the I/O thread: connection -------------------------------------------------------------

    def _io_connect(self) -> None:
        r = redis.Redis.from_url(self._url.reveal(), socket_timeout=self.socket_timeout_secs,
                                 socket_connect_timeout=self.socket_timeout_secs, single_connection_client=True,
                                 client_name=f"squall-{self.component_id}-{self.task_index}")
        try:
            r.xgroup_create(self.stream, self.group, id=self.start_id, mkstream=True)
        except redis.exceptions.ResponseError as e:
            if "BUSYGROUP" not in str(e):
                close_quietly(r)
                raise
        except Exception:
            close_quietly(r)
            raise
        self._r = r

    def _io_lost(self, error: BaseException) -> None:
        self._recover_pending = True  # the reply of a read may have been lost with the connection
        super()._io_lost(error)

    def _io_close(self) -> None:
        r, self._r = self._r, None
        close_quietly(r)

    def _io_serve(self) -> None:
        """Read ahead, settle what the spout handed over, take back what needs taking, and keep
        what is held from being claimed by others, until closed. Reading comes first: a spout
        with an empty buffer makes small waves, while acks can wait a moment."""
        touch_every = max(0.05, self._idle_ms / 4000)
        touch_limit = self._idle_ms / 3000
        next_touch = time.monotonic() + touch_every
        while not self._closing:
            now = time.monotonic()
            if self._recover_pending:
                self._recover()
                self._recover_pending = False
            if now >= self._next_claim:
                self._next_claim = now + self._claim_every
                self._claim_dead()
            if self._retry_heap and self._retry_heap[0][0] <= now:
                self._claim_due_retries(now)
            if now >= next_touch:
                next_touch = now + touch_every
                self._touch(now, touch_limit)
            self._read(now)
            self._settle(ACK_CHUNK)
        self._settle(None)  # closing: the last acks and dead letters

    # -- the I/O thread: reading ----------------------------------------------------------------

    def _free(self) -> int:
        """How many more entries the spout may take: `read_ahead` max spout pendings less what it
        holds (taken and not yet acked at Redis, or dead-lettered; a failed entry waiting for its
        retry is not held by the topology). Counted here, on the I/O thread, so never more than
        there is."""
        return self.read_ahead * self._prefetch() - len(self._held) + len(self._retry_heap)

    def _read(self, now: float) -> None:
        """Read new entries, as many as the spout has room for (up to batch_size). While acks come
        back (freeing room), wait until a quarter of max.spout.pending is free and read that in
        one go: many small reads make many small waves."""
        busy = bool(self._actions or self._to_ack or self._to_dead)
        free = self._free()
        count = min(self.batch_size or free, free)
        if count <= 0 or (busy and free < max(1, self._prefetch() // 4)):
            if not busy:
                self._stop.wait(ROOM_WAIT_SECS)
            return
        if busy:
            block = None  # there is settling to do: do not wait here
        else:
            block = ACK_WAIT_MS if self._inflight else READ_BLOCK_MS
            if self._retry_heap:
                block = min(block, max(1, int((self._retry_heap[0][0] - now) * 1000)))
        res = self._r.xreadgroup(self.group, self.consumer, {self.stream: ">"}, count=count, block=block)
        self._hand_over([self._message(eid, fields, 1) for _stream, entries in res or () for eid, fields in entries])

    def _message(self, eid: Any, fields: dict | None, attempts: int, failures: int = 0) -> Message:
        fields = fields or {}
        return Message(as_text(eid), fields.get(self._field), attempts, handle=fields, failures=failures)

    def _hand_over(self, messages: list[Message]) -> None:
        """Decode here, off the wave's path, and give the spout all of a reply at once (so that a
        wave does not end in the middle of it)."""
        now = time.monotonic()
        self.decode_many(messages)
        for m in messages:
            m.touched_at = now
            self._held[m.id] = m
        self._incoming.extend(messages)

    def _claim_due_retries(self, now: float) -> None:
        heap, due = self._retry_heap, []
        while heap and heap[0][0] <= now and len(due) < CLAIM_COUNT:
            due.append(heapq.heappop(heap)[2])
        try:
            claimed = self._r.xclaim(self.stream, self.group, self.consumer, 0, [m.id for m in due])
        except Exception:
            for m in due:  # still pending and ours: try again later
                heapq.heappush(heap, (now, next(self._seq), m))
            raise
        got = {as_text(eid): fields for eid, fields in claimed or () if fields is not None}
        back = []
        for m in due:
            fields = got.get(m.id)
            if fields is None:  # deleted from the stream meanwhile (XDEL / trimming): nothing to retry
                self._held.pop(m.id, None)
                self.counters.add("vanished")
                continue
            back.append(self._message(m.id, fields, m.attempts + 1, m.failures))  # XCLAIM counted a delivery
        self._hand_over(back)

    def _recover(self) -> None:
        """After a connection error: entries Redis delivered to this consumer whose reply was lost
        are pending for it but unknown to the spout. Take them back now (XCLAIM to itself)
        rather than wait for claim_idle."""
        rows = self._r.xpending_range(self.stream, self.group, min="-", max="+",
                                      count=len(self._held) + self._prefetch() + 1000, consumername=self.consumer)
        lost = {as_text(r["message_id"]): int(r["times_delivered"]) for r in rows}
        for eid in self._held:
            lost.pop(eid, None)
        if not lost:
            return
        claimed = [(as_text(eid), fields) for eid, fields in
                   self._r.xclaim(self.stream, self.group, self.consumer, 0, list(lost)) or () if fields is not None]
        failures = self._failures([eid for eid, _ in claimed])
        self._hand_over([self._message(eid, fields, lost[eid] + 1, failures.get(eid, 0))  # XCLAIM counted a delivery
                         for eid, fields in claimed])
        self.counters.add("recovered", len(lost))

    def _claim_dead(self) -> None:
        """Take over entries idle longer than claim_idle (their consumer is gone)."""
        cursor = "0-0"
        for _ in range(10):  # at most 10 * CLAIM_COUNT entries per claim tick, and only what fits
            room = min(CLAIM_COUNT, self._free())
            if room <= 0:
                break
            res = self._r.xautoclaim(self.stream, self.group, self.consumer, self._idle_ms, cursor, count=room)
            cursor = as_text(res[0])
            fresh = [(as_text(eid), fields) for eid, fields in res[1]
                     if fields is not None and as_text(eid) not in self._held]
            if fresh:
                self._take_over(fresh)
            if cursor == "0-0":
                break

    def _take_over(self, entries: list[tuple[str, dict]]) -> None:
        ids = [eid for eid, _ in entries]
        counts, failures = self._delivery_counts(ids), self._failures(ids)
        back = []
        for eid, fields in entries:
            m = self._message(eid, fields, counts.get(eid, 2), failures.get(eid, 0))
            self.counters.add("claimed")
            if m.attempts > self.max_deliveries:
                self._held[m.id] = m
                self._to_dead.append((m, Failure("lost", f"delivered {m.attempts - 1} times without an ack "
                                                         f"(its consumer died or timed out)", m.attempts)))
            else:
                back.append(m)
        self._hand_over(back)

    def _delivery_counts(self, ids: list[str]) -> dict[str, int]:
        lo, hi = min(ids, key=entry_id_key), max(ids, key=entry_id_key)
        rows = self._r.xpending_range(self.stream, self.group, min=lo, max=hi, count=len(ids) + 1000,
                                      consumername=self.consumer)
        return {as_text(r["message_id"]): int(r["times_delivered"]) for r in rows}

    def _failures(self, ids: list[str]) -> dict[str, int]:
        """The topology's failures of these entries so far, as the retries recorded them."""
        if not ids:
            return {}
        got = self._r.hmget(self.failures_key, ids)
        return {eid: int(n) for eid, n in zip(ids, got, strict=True) if n is not None}

    def _touch(self, now: float, limit: float) -> None:
        """Reset the idle time of what this consumer holds (XCLAIM ... JUSTID to itself), so that
        no one else claims it while its tree still runs, even when next_tuple is not called."""
        ids = []
        for m in self._held.values():
            if now - m.touched_at > limit:
                m.touched_at = now
                ids.append(m.id)
        for i in range(0, len(ids), CLAIM_COUNT):
            self._r.xclaim(self.stream, self.group, self.consumer, 0, ids[i:i + CLAIM_COUNT], justid=True)
        if ids:
            self.counters.add("touched", len(ids))

    # -- the I/O thread: acks, retries, dead letters -----------------------------------------------

    def _settle(self, max_acks: int | None) -> None:
        """Take the actions the spout handed over, then send the dead letters and (up to
        `max_acks`, None: all) acks waiting. What a lost connection interrupts stays waiting, and
        is sent after the reconnect."""
        actions, failed = self._actions, {}
        while actions:
            kind, m, failure = actions.popleft()
            if kind == "ack":
                self._to_ack.append(m)
            elif kind == self.RETRY_ACTION:  # stays pending; claimed back when due
                heapq.heappush(self._retry_heap, (time.monotonic() + self.retry_delay_secs, next(self._seq), m))
                if m.failures:
                    failed[m.id] = m.failures
            else:
                self._to_dead.append((m, failure))
        if failed:  # where a spout that takes these entries over after a crash finds them
            self._r.hset(self.failures_key, mapping=failed)
        held, done = self._held, self._done
        while self._to_dead:
            m, failure = self._to_dead[0]
            if self._send_dead_letter(m, failure):
                done.append((DEAD, m, failure))
            del self._to_dead[0]
            held.pop(m.id, None)
        to_ack, sent = self._to_ack, 0
        while to_ack and (max_acks is None or sent < max_acks):
            chunk = to_ack[:ACK_CHUNK]
            self._xack([m.id for m in chunk], [m.id for m in chunk if m.failures])
            del to_ack[:len(chunk)]
            sent += len(chunk)
            for m in chunk:
                held.pop(m.id, None)
            done.append((ACKED, chunk, None))

    def _xack(self, ids: list[str], failed: list[str]) -> None:
        """XACK these entries, and forget the failures of those that had some, in one transaction
        (a crash between the two would leave their failures behind for good)."""
        if not failed:
            self._r.xack(self.stream, self.group, *ids)
            return
        pipe = self._r.pipeline(transaction=True)
        pipe.xack(self.stream, self.group, *ids)
        pipe.hdel(self.failures_key, *failed)
        pipe.execute()

    def _send_dead_letter(self, m: Message, failure: Failure) -> bool:
        """XADD to the dead-letter stream and XACK at the source, in one transaction. If an
        earlier try's reply was lost with the connection and the entry is no longer pending,
        that try went through: it is not sent twice."""
        if m.id in self._unsure and not self._r.xpending_range(self.stream, self.group, min=m.id, max=m.id, count=1):
            self._unsure.discard(m.id)
            return True
        fields = dict(m.handle or {})
        fields.update({k.encode(): v.encode() for k, v in failure.fields(self.stream, m.id).items()})
        pipe = self._r.pipeline(transaction=True)
        pipe.xadd(self.dead_letter_stream, fields)
        pipe.xack(self.stream, self.group, m.id)
        pipe.hdel(self.failures_key, m.id)
        self._unsure.add(m.id)
        try:
            pipe.execute()
        except redis.exceptions.ResponseError as e:  # refused by Redis (not a lost connection): report it
            self._unsure.discard(m.id)
            self._done.append((REPORT, f"dead-lettering entry {m.id} to {self.dead_letter_stream!r} failed: "
                                       f"{self._error_text(e)}", None))
            return False
        self._unsure.discard(m.id)
        return True
