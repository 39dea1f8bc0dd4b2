"""Trident spouts over Kafka: a batch is a set of offset ranges, [start, end) per partition,
stored with its txid before the batch runs; a replay re-reads exactly those ranges.

- `TransactionalKafkaSpout`: batch n is always the same records (Storm's transactional spout).
- `OpaqueKafkaSpout`: Storm's OpaqueTridentKafkaSpout; `replay_batch` re-reads the stored
  ranges, so a batch replayed after a crash mid-commit is the same batch.

Neither joins a consumer group or commits offsets: the committed txid in the Trident state is
the position. Log ends are found by reading (not from watermarks). A record whose value does not
decode is not emitted: it is counted, logged and, given `dead_letter_topic`, copied there with
reason `decode` (a replay skips it the same way).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from squall.connectors.kafka.common import decode_key, kafka_bootstrap
from squall.connectors.kafka.spout import FIELDS
from squall.connectors.schemes import DecodeError, Scheme
from squall.trident.spouts import OpaqueTransactionalSpout, TransactionalSpout

log = logging.getLogger("squall.connectors.kafka")

FETCH_IDLE_SECS = 0.3  # a new batch ends when no record came for this long
FIRST_FETCH_SECS = 1.0  # ... or when none came at all for this long
REPLAY_TIMEOUT_SECS = 60.0
PARTITIONS_REFRESH_SECS = 30.0  # how old the known partition list may be: new partitions join within this


class KafkaBatchReader:
    """Reads offset ranges of one topic's partitions with an unsubscribed consumer."""

    def __init__(self, bootstrap_servers: Any, topic: str, scheme: Any, batch_size: int,
                 first_poll_offset: str, consumer_config: dict | None, dead_letter_topic: str | None,
                 group_id: str | None = None):
        if first_poll_offset not in ("earliest", "latest"):
            raise ValueError(f"first_poll_offset must be 'earliest' or 'latest', got {first_poll_offset!r}")
        self.bootstrap_servers = kafka_bootstrap(bootstrap_servers)
        self.topic = topic
        self.scheme = scheme
        self.batch_size = int(batch_size)
        self.first_poll_offset = first_poll_offset
        self.consumer_config = dict(consumer_config or {})
        self.dead_letter_topic = dead_letter_topic
        self.group_id = group_id or f"squall-trident-{topic}"  # names the client; never joined
        self.bad_payloads = 0
        self._clients: Any = None
        self._cache: tuple[Any, list[list]] | None = None  # (meta, rows) of the batch just read
        self._partitions: tuple[float, list[int]] | None = None  # (when asked, partitions)
        self._next: dict[int, int] | None = None  # where the assigned consumer reads on, per partition

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_clients": None, "_cache": None, "_partitions": None, "_next": None}

    def _consumer(self) -> Any:
        if self._clients is None:
            from confluent_kafka import Consumer, Producer  # noqa: PLC0415

            c = Consumer({"bootstrap.servers": self.bootstrap_servers, "group.id": self.group_id,
                          "enable.auto.commit": False, "logger": log, **self.consumer_config})
            p = Producer({"bootstrap.servers": self.bootstrap_servers, "logger": log}) \
                if self.dead_letter_topic else None
            self._clients = (c, p)
        return self._clients[0]

    def partitions(self) -> list[int]:
        """The topic's partitions, asked of the broker at most every PARTITIONS_REFRESH_SECS: a
        metadata request can take as long as reading a whole batch."""
        now = time.monotonic()
        if self._partitions is not None and now - self._partitions[0] < PARTITIONS_REFRESH_SECS:
            return self._partitions[1]
        md = self._consumer().list_topics(self.topic, timeout=15).topics.get(self.topic)
        if md is None or md.error is not None or not md.partitions:
            raise RuntimeError(f"Kafka topic {self.topic!r} at {self.bootstrap_servers} has no partitions "
                               f"({getattr(md, 'error', None)}); create it first")
        self._partitions = (now, sorted(md.partitions))
        return self._partitions[1]

    def next_ranges(self, prev_meta: dict | None) -> tuple[dict[str, list[int]], list[list]] | None:
        """Read up to batch_size new records after `prev_meta`'s ranges: (meta, rows), or None."""
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition  # noqa: PLC0415

        prev = prev_meta or {}
        default = OFFSET_BEGINNING if self.first_poll_offset == "earliest" else OFFSET_END
        starts = {p: prev[str(p)][1] if str(p) in prev else default for p in self.partitions()}
        c = self._consumer()
        if self._next != starts:  # not where the last batch stopped: a first batch, a replay, new partitions
            c.assign([TopicPartition(self.topic, p, off) for p, off in starts.items()])
        got: list[Any] = []
        last = time.monotonic()
        while len(got) < self.batch_size and time.monotonic() - last < (FETCH_IDLE_SECS if got else FIRST_FETCH_SECS):
            msgs = [m for m in c.consume(self.batch_size - len(got), 0.05) if m.error() is None]
            if msgs:
                got += msgs
                last = time.monotonic()
        # stay assigned: the next batch usually starts here, and reading on (records librdkafka
        # already fetched included) saves a reassignment and its fetch round trips per batch
        self._next = dict(starts)
        for m in got:
            self._next[m.partition()] = m.offset() + 1
        if not got:
            return None
        meta = self._ranges(prev, list(starts), got)
        rows = self._rows(got)
        self._cache = (meta, rows)
        return meta, rows

    @staticmethod
    def _ranges(prev: dict, partitions: list[int], got: list[Any]) -> dict[str, list[int]]:
        """Each partition's [start, end): from the previous end (or the first offset read, the
        first time) to one past the last offset read; an empty range at the old end if none."""
        first: dict[int, int] = {}
        end: dict[int, int] = {}
        for m in got:
            p, off = m.partition(), m.offset()
            first[p] = min(first.get(p, off), off)
            end[p] = max(end.get(p, off + 1), off + 1)
        meta = {}
        for p in partitions:
            old = prev.get(str(p), [None, None])[1]
            if p in end:
                meta[str(p)] = [first[p] if old is None else old, end[p]]
            elif old is not None:
                meta[str(p)] = [old, old]
        return meta

    def read_ranges(self, meta: dict[str, list[int]]) -> list[list]:
        """Exactly the records of `meta`'s ranges (a replay)."""
        if self._cache is not None and self._cache[0] == meta:
            return self._cache[1]
        from confluent_kafka import TopicPartition  # noqa: PLC0415

        want = {int(p): (s, e) for p, (s, e) in meta.items() if e > s}
        if not want:
            return []
        c = self._consumer()
        self._next = None  # reading on after this needs a new assignment
        c.assign([TopicPartition(self.topic, p, s) for p, (s, _e) in want.items()])
        got, reached = [], {p: s for p, (s, _e) in want.items()}
        deadline = time.monotonic() + REPLAY_TIMEOUT_SECS
        while any(reached[p] < e for p, (_s, e) in want.items()):
            if time.monotonic() > deadline:
                c.unassign()
                raise RuntimeError(f"Kafka topic {self.topic!r}: cannot re-read the batch's offset ranges {meta} "
                                   f"(reached {reached}); were the records deleted by retention?")
            for m in c.consume(1000, 0.1):
                if m.error() is None and m.offset() < want[m.partition()][1]:
                    got.append(m)
                    reached[m.partition()] = m.offset() + 1
                elif m.error() is None:
                    reached[m.partition()] = max(reached[m.partition()], want[m.partition()][1])
        c.unassign()
        return self._rows(got)

    def _rows(self, msgs: list[Any]) -> list[list]:
        scheme = Scheme(self.scheme)
        rows = []
        for m in msgs:
            try:
                if m.value() is None:
                    raise DecodeError("record has no value (a tombstone)")
                rows.append([m.topic(), m.partition(), m.offset(), decode_key(m.key()), scheme.decode(m.value())])
            except DecodeError as e:
                self._bad(m, e)
        return rows

    def _bad(self, m: Any, error: DecodeError) -> None:
        self.bad_payloads += 1
        log.warning("kafka %s[%d]@%d: %s (skipped)", m.topic(), m.partition(), m.offset(), error)
        producer = self._clients[1] if self._clients else None
        if producer is not None:
            where = f"{m.partition()}:{m.offset()}".encode()
            headers = [("squall-reason", b"decode"), ("squall-error", str(error)[:500].encode()),
                       ("squall-source", m.topic().encode()), ("squall-source-id", where)]
            producer.produce(self.dead_letter_topic, value=m.value(), key=m.key(), headers=headers)
            producer.flush(30)

    def close(self) -> None:
        if self._clients is not None:
            self._clients[0].close()
            if self._clients[1] is not None:
                self._clients[1].flush(10)
            self._clients = None


class _KafkaTrident:
    """What both Kafka Trident spouts share: KafkaSpout's arguments, and the reader.

    `topics`: one topic (a str, or a list of one). `group_id` only names the reading client: no
    group is joined and nothing is committed. `max_retries` is accepted for KafkaSpout's
    signature; Trident replays a failed batch as a whole (same txid, same ranges) instead."""

    def __init__(self, bootstrap_servers: Any = None, topics: str | list[str] = "", group_id: str | None = None,
                 scheme: Any = "string", max_retries: int | None = None, dead_letter_topic: str | None = None,
                 first_poll_offset: str = "earliest", consumer_config: dict | None = None, *,
                 batch_size: int = 1000):
        names = [topics] if isinstance(topics, str) else list(topics)
        if len(names) != 1 or not names[0]:
            raise ValueError(f"{type(self).__name__} reads one topic, got {topics!r}: make one spout per topic")
        self.topic = names[0]
        self.group_id = group_id
        self.max_retries = max_retries
        self.reader = KafkaBatchReader(bootstrap_servers, self.topic, scheme, batch_size, first_poll_offset,
                                       consumer_config, dead_letter_topic, group_id)

    def get_output_fields(self) -> list[str]:
        return list(FIELDS)

    @property
    def bad_payloads(self) -> int:
        return self.reader.bad_payloads

    def close(self) -> None:
        self.reader.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.topic!r} at {self.reader.bootstrap_servers})"


class TransactionalKafkaSpout(_KafkaTrident, TransactionalSpout):
    """Batch meta = {partition: [start, end)}; batch n re-reads exactly its ranges."""

    def new_batch(self, txid: int, prev_meta: Any) -> Any:
        got = self.reader.next_ranges(prev_meta)
        return None if got is None else got[0]

    def batch_rows(self, txid: int, meta: Any) -> list[list]:
        return self.reader.read_ranges(meta)


class OpaqueKafkaSpout(_KafkaTrident, OpaqueTransactionalSpout):
    """Storm's OpaqueTridentKafkaSpout: each batch reads on from the previous batch's ends."""

    def emit_batch(self, txid: int, prev_meta: Any) -> tuple[list[list], Any] | None:
        got = self.reader.next_ranges(prev_meta)
        return None if got is None else (got[1], got[0])

    def replay_batch(self, txid: int, prev_meta: Any, meta: Any) -> list[list]:
        return self.reader.read_ranges(meta)
