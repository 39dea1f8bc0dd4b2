"""Transactional Trident spouts over brokers that can re-read by offset: a batch's metadata
is the offset range it covers, persisted before it runs, so a replay of txid n re-reads
exactly the same messages.

- `RedisStreamTransactionalSpout`: entry ID ranges of a Redis stream (XRANGE).
- `JetStreamTransactionalSpout`: stream sequence ranges of a NATS JetStream stream.

Neither consumes or acknowledges anything at the broker: the stream is the log, and the
committed txid (in the Trident state's store) is the position. A payload that does not
decode is not emitted; it is counted, logged, and, where a dead-letter target is given,
copied there with the reason (replays see the same payload and skip it the same way).
"""

from __future__ import annotations

import logging
from typing import Any

from squall.connectors.schemes import DecodeError, Scheme
from squall.connectors.settings import redact_url
from squall.trident.spouts import TransactionalSpout

log = logging.getLogger("squall.connectors")


class RedisStreamTransactionalSpout(TransactionalSpout):
    """Batches of up to `batch_size` entries; meta = [first id, last id]. Emits (id, message)."""

    def __init__(self, stream: str, url: str | None = None, *, payload_field: str = "payload",
                 scheme: Any = "string", batch_size: int = 1000, dead_letter_stream: str | None = None):
        self.stream = stream
        self.url = url
        self.payload_field = payload_field
        self.scheme = scheme
        self.batch_size = int(batch_size)
        self.dead_letter_stream = dead_letter_stream
        self.bad_payloads = 0
        self._client = None

    def get_output_fields(self) -> list[str]:
        return ["id", "message"]

    def _redis(self) -> Any:
        if self._client is None:
            import redis  # noqa: PLC0415

            from squall.connectors.redis.connection import redis_url  # noqa: PLC0415

            self._client = redis.Redis.from_url(redis_url(self.url).reveal(), socket_timeout=10)
        return self._client

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_client": None}

    def new_batch(self, txid: int, prev_meta: Any) -> Any:
        start = f"({prev_meta[1]}" if prev_meta else "-"
        entries = self._redis().xrange(self.stream, min=start, max="+", count=self.batch_size)
        if not entries:
            return None
        return [entries[0][0].decode(), entries[-1][0].decode()]

    def batch_rows(self, txid: int, meta: Any) -> list[list]:
        entries = self._redis().xrange(self.stream, min=meta[0], max=meta[1])
        scheme = Scheme(self.scheme)
        rows = []
        field = self.payload_field.encode()
        for eid, fields in entries:
            eid = eid.decode()
            try:
                body = fields.get(field)
                if body is None:
                    raise DecodeError(f"entry has no field {self.payload_field!r}")
                rows.append([eid, scheme.decode(body)])
            except DecodeError as e:
                self._bad(eid, fields, e)
        return rows

    def _bad(self, eid: str, fields: dict, error: Exception) -> None:
        self.bad_payloads += 1
        log.warning("redis stream %s entry %s: %s (skipped)", self.stream, eid, error)
        if self.dead_letter_stream:
            self._redis().xadd(self.dead_letter_stream, {**fields, "squall-reason": "decode",
                                                         "squall-error": str(error), "squall-source-id": eid})

    def __repr__(self) -> str:
        return f"RedisStreamTransactionalSpout({self.stream!r} at {redact_url(self.url)})"


class JetStreamTransactionalSpout(TransactionalSpout):
    """Batches of up to `batch_size` messages; meta = [first sequence, last sequence].
    Emits (sequence, message). Reads with direct gets by sequence (no consumer state at the
    server), so a replay reads the same messages as long as the stream keeps them."""

    def __init__(self, stream: str, url: str | None = None, *, subject: str | None = None, scheme: Any = "string",
                 batch_size: int = 1000, dead_letter_subject: str | None = None):
        self.stream = stream
        self.subject = subject  # only messages on this subject (None: every subject of the stream)
        self.url = url
        self.scheme = scheme
        self.batch_size = int(batch_size)
        self.dead_letter_subject = dead_letter_subject
        self.bad_payloads = 0
        self._io = None

    def get_output_fields(self) -> list[str]:
        return ["seq", "message"]

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_io": None}

    def _conn(self) -> Any:
        if self._io is None:
            import nats  # noqa: PLC0415

            from squall.connectors.event_loop import EventLoopThread  # noqa: PLC0415
            from squall.connectors.nats.jetstream import nats_servers  # noqa: PLC0415

            loop = EventLoopThread("squall-jetstream-trident")
            nc = loop.call(nats.connect(nats_servers(self.url).reveal()), 15)
            self._io = (loop, nc, nc.jetstream())
        return self._io

    def close(self) -> None:
        if self._io is not None:
            loop, nc, _ = self._io
            try:
                loop.call(nc.close(), 10)
            finally:
                loop.stop()
            self._io = None

    def _last_seq(self) -> int:
        loop, _, js = self._conn()
        info = loop.call(js.stream_info(self.stream), 10)
        return int(info.state.last_seq)

    def new_batch(self, txid: int, prev_meta: Any) -> Any:
        start = prev_meta[1] + 1 if prev_meta else 1
        last = self._last_seq()
        if last < start:
            return None
        return [start, min(last, start + self.batch_size - 1)]

    def batch_rows(self, txid: int, meta: Any) -> list[list]:
        loop, nc, js = self._conn()

        async def fetch() -> list:
            out = []
            for seq in range(meta[0], meta[1] + 1):
                try:
                    out.append(await js.get_msg(self.stream, seq))
                except Exception as e:  # noqa: BLE001 - a deleted sequence is a gap, not an error
                    if "not found" not in str(e).lower():
                        raise
            return out

        scheme = Scheme(self.scheme)
        rows = []
        for m in loop.call(fetch(), 60):
            if self.subject is not None and m.subject != self.subject:
                continue
            try:
                rows.append([m.seq, scheme.decode(m.data or b"")])
            except DecodeError as e:
                self.bad_payloads += 1
                log.warning("jetstream %s seq %d: %s (skipped)", self.stream, m.seq, e)
                if self.dead_letter_subject:
                    headers = {"squall-reason": "decode", "squall-error": str(e)[:500],
                               "squall-source-seq": str(m.seq)}
                    loop.call(js.publish(self.dead_letter_subject, m.data or b"", headers=headers), 10)
        return rows

