"""KafkaSpout: storm-kafka-client's spout on confluent-kafka, built on the shared queue spout.

A record is emitted as ("topic", "partition", "offset", "key", "value") with msg id
(topic, partition, offset).

- **Which task reads which partition** (`assignment`):
  - "group" (the default): each task is a consumer of `group_id` subscribed to the topics, and
    Kafka's group protocol spreads the partitions over the tasks (and over any other process of
    the group), moving them when a consumer joins or leaves.
  - "manual": Storm's own default (storm-kafka-client's round-robin manual partitioner). The
    topics' partitions, sorted by topic and number, are dealt out over the spout's tasks in turn;
    each task assigns itself its share, with no group membership and no rebalance. Every
    `partition_refresh_secs` the task reads the topics' partitions again, takes up new ones and
    lets go of any it no longer has. A task that dies is started again with the same share.
    Offsets are still committed under `group_id`.

- **Commits** are manual: every `commit_interval_secs` (and on revocation and close) each
  partition commits its highest contiguous done offset (`offsets`): acks out of order never
  commit a gap, so a restart resumes at the first record whose tree did not complete.
- **A failed tuple** is emitted again (kept in memory: Storm seeks back, same effect) after an
  exponential backoff, `retry_delay_secs * 2**(attempt-1)` up to `max_retry_delay_secs`; after
  `max_retries` retries it is produced to `dead_letter_topic` with its key, value, headers and the
  squall-* headers (reason, error, attempts, ...) and, once the broker confirmed it, counts as
  done. Without a dead-letter topic it goes to the topology's dead-letter sink
  (`squall.dead.letter.sink`, default the JSON-lines file `squall.dead.letter.path`).
- **A payload that does not decode** by `scheme` is dead-lettered at once (reason `decode`).
- **Revocation** commits what is done of the revoked partitions and drops what the spout still
  holds of them: its replay belongs to the partitions' new owner. Late acks of such records are
  counted as `stale`.
- **max spout pending**: the records polled and not done are at most `read_ahead` times it (those
  in flight, and as many decoded and ready); while that is reached the spout consumes nothing,
  and after `PAUSE_AFTER_SECS` it pauses its partitions.
- `first_poll_offset`: "earliest" / "latest" start a group that has no committed offset there
  (Storm's UNCOMMITTED_EARLIEST / UNCOMMITTED_LATEST); "EARLIEST" / "LATEST" ignore committed
  offsets on this spout's first assignment of a partition.

All client calls run on the spout's I/O thread (`io_thread`): `next_tuple` only takes from a queue.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from typing import Any

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from squall.connectors.dead_letters import Failure
from squall.connectors.io_thread import REPORT, IOThreadBrokerSpout
from squall.connectors.kafka.common import decode_key, kafka_bootstrap, kafka_error_text, shown_config
from squall.connectors.kafka.offsets import OffsetManager
from squall.connectors.kafka.settling import KafkaSettling
from squall.connectors.spout import Message

log = logging.getLogger("squall.connectors.kafka")

FIELDS = ["topic", "partition", "offset", "key", "value"]
FIRST_POLL = {"earliest": ("earliest", False), "latest": ("latest", False),
              "uncommitted_earliest": ("earliest", False), "uncommitted_latest": ("latest", False),
              "EARLIEST": ("earliest", True), "LATEST": ("latest", True)}
POLL_MAX = 20000  # records per consume call, at most (a whole reply makes one wave, not many small ones)
BUSY_WAIT_SECS = 0.005  # consume timeout while trees are in flight or actions wait
IDLE_WAIT_SECS = 0.05
# Max spout pending reached: stop consuming, but pause the partitions only after this long. A
# pause drops what the client has prefetched, and fetching it again after every wave would stall
# the spout; a consumer that does not consume hears of no rebalance, so not for long.
PAUSE_AFTER_SECS = 2.0
# librdkafka (>= 2.4) waits this long before fetching again once its queue held queued.min.messages;
# its default, 1 s, leaves the spout with nothing to emit for a while every so many records.
FETCH_QUEUE_BACKOFF_MS = 10
ASSIGNMENTS = ("group", "manual")


class KafkaSpout(KafkaSettling, IOThreadBrokerSpout):
    """A reliable spout over Kafka `topics` in consumer group `group_id`; see the module docstring."""

    broker_name = "Kafka"
    read_ahead = 2  # records polled and not done: up to twice max spout pending (BrokerSpout)

    def __init__(self, bootstrap_servers: str | list[str] | None = None, topics: str | list[str] = (),
                 group_id: str = "squall", scheme: Any = "string", max_retries: int | None = 5,
                 dead_letter_topic: str | None = None, first_poll_offset: str = "earliest",
                 consumer_config: dict | None = None, *, meta_field: str | None = None,
                 retry_delay_secs: float = 0.5, max_retry_delay_secs: float = 10.0,
                 commit_interval_secs: float = 1.0, producer_config: dict | None = None,
                 open_timeout_secs: float = 15.0, max_deliveries: int | None = None,
                 assignment: str = "group", partition_refresh_secs: float = 2.0):
        super().__init__(scheme, ("value",), meta_field, max_retries, retry_delay_secs, max_deliveries)
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        if not self.topics:
            raise ValueError("KafkaSpout needs at least one topic: KafkaSpout(servers, ['orders'], 'group')")
        if first_poll_offset not in FIRST_POLL:
            raise ValueError(f"first_poll_offset {first_poll_offset!r} is not one of {sorted(FIRST_POLL)}")
        if assignment not in ASSIGNMENTS:
            raise ValueError(f"assignment {assignment!r} is not one of {ASSIGNMENTS}: \"group\" lets the consumer "
                             f"group spread the partitions, \"manual\" deals them out over the spout's tasks")
        self.bootstrap_servers = kafka_bootstrap(bootstrap_servers)
        self.url = f"kafka://{self.bootstrap_servers}"
        self.group_id = group_id
        self.dead_letter_topic = dead_letter_topic
        self.first_poll_offset = first_poll_offset
        self.consumer_config = dict(consumer_config or {})
        self.producer_config = dict(producer_config or {})
        self.max_retry_delay_secs = float(max_retry_delay_secs)
        self.commit_interval_secs = float(commit_interval_secs)
        self.open_timeout_secs = float(open_timeout_secs)
        self.assignment = assignment
        self.partition_refresh_secs = float(partition_refresh_secs)

    # -- the spout's side -------------------------------------------------------------------

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(FIELDS + ([self.meta_field] if self.meta_field else []))

    def _values(self, m: Message) -> list[Any]:
        topic, partition, offset = m.id
        values = [topic, partition, offset, decode_key(m.handle[0]), m.value]
        if self.meta_field:
            values.append(self._meta(m))
        return values

    def _meta(self, m: Message) -> dict[str, Any]:
        return {"id": m.id, "attempts": m.attempts, "source": m.id[0], "headers": dict(m.headers or {})}

    def _source_name(self) -> str:
        return ",".join(self.topics)

    def _no_payload(self, m: Message) -> str:
        return "record has no value (a tombstone)"

    def _current(self, m: Message) -> bool:
        return self._owned(m)

    def _dropped(self, n: int) -> None:
        self.counters.add("revoked_dropped", n)  # their partition moved to another consumer

    def activate(self) -> None:
        self._active = True  # the I/O thread resumes fetching

    def deactivate(self) -> None:
        """Stop fetching (the consumer pauses its partitions, staying in the group); what was
        fetched and not emitted yet stays held and is emitted after activate."""
        self._active = False

    def _owned(self, m: Message) -> bool:
        return self._gens.get((m.id[0], m.id[1])) == m.handle[1]

    def _connect(self) -> None:
        self._offsets = OffsetManager()
        self._gens: dict[tuple[str, int], int] = {}  # assignment generation of each owned partition
        self._gen_seq = itertools.count(1)
        self._seen: set[tuple[str, int]] = set()  # partitions this spout was ever assigned
        self._retry_heap: list[tuple[float, int, Message]] = []
        self._dead_retry: list[tuple[float, Message, Failure]] = []
        self._seq = itertools.count()
        self._dead_inflight = 0
        self._paused = False
        self._full_since: float | None = None  # since when max spout pending is reached
        self._next_commit = 0.0
        self._next_refresh = 0.0  # "manual": when the topics' partitions are read again
        self._last_error = ""
        self._consumer: Any = None
        self._producer: Any = None
        self._sink: Any = None
        if self.dead_letter_topic is None:
            from squall.observe.dead_letter import make_sink  # noqa: PLC0415 - only without a topic

            self._sink = make_sink(getattr(self, "_conf", {}))
        try:
            self._start_io(self.open_timeout_secs + 5)
        except Exception as e:  # noqa: BLE001
            raise ConnectionError(f"{self.component_id}: cannot consume {self.topics} in group {self.group_id!r} "
                                  f"from Kafka at {self.bootstrap_servers}: {self._error_text(e)}; is the broker "
                                  f"up and the address right (bootstrap_servers / KAFKA_BOOTSTRAP_SERVERS)?") from None
        log.info("%s[%d]: consuming %s in group %r (%s assignment) from %s", self.component_id, self.task_index,
                 self.topics, self.group_id, self.assignment, self.bootstrap_servers)

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self._conf = conf
        super().open(conf, context, collector)

    def _disconnect(self) -> None:
        self._stop_io(self.open_timeout_secs + 10)

    # -- the I/O thread: clients --------------------------------------------------------------

    def _client_conf(self, extra: dict) -> dict:
        conf = {"bootstrap.servers": self.bootstrap_servers, "logger": log, "error_cb": self._on_client_error,
                "client.id": f"squall-{self.component_id}-{self.task_index}"}
        conf.update(extra)
        return conf

    def _io_connect(self) -> None:
        reset, _strict = FIRST_POLL[self.first_poll_offset]
        conf = self._client_conf({"group.id": self.group_id, "enable.auto.commit": False,
                                  "enable.auto.offset.store": False, "auto.offset.reset": reset,
                                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                                  "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
                                  "enable.partition.eof": False, **self.consumer_config})
        try:
            consumer = Consumer(conf)
        except KafkaException as e:
            raise ValueError(f"bad consumer settings {shown_config(self.consumer_config)}: {e}") from None
        try:
            consumer.list_topics(timeout=self.open_timeout_secs)  # reachable? (raises if not)
            if self.assignment == "group":
                consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                   on_lost=self._on_lost)
            if self.dead_letter_topic:
                self._producer = Producer(self._client_conf({"enable.idempotence": True, "linger.ms": 5,
                                                             **self.producer_config}))
        except Exception:
            consumer.close()
            raise
        self._consumer = consumer
        self._next_refresh = 0.0  # "manual": its share, at once

    def _io_close(self) -> None:
        if self.assignment == "manual" and self._gens:  # a group's consumer hears of its revocation
            self._let_go(set(self._gens))
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()  # leaves the group: the partitions move on at once
            except Exception as e:  # noqa: BLE001 - closing a broken client; nothing to do
                log.debug("closing the Kafka consumer: %s", e)

    def _on_client_error(self, err: Any) -> None:
        text = kafka_error_text(err)
        if text != self._last_error:  # librdkafka repeats a transport error on every retry
            self._last_error = text
            self._done.append((REPORT, f"Kafka at {self.bootstrap_servers}: {text}", None))

    # -- the I/O thread: rebalances -----------------------------------------------------------

    def _on_assign(self, consumer: Any, partitions: list) -> None:
        self._own(partitions)
        consumer.assign(partitions)
        self._paused = False

    def _own(self, partitions: list) -> None:
        """Start tracking newly assigned `partitions` (TopicPartitions, whose start offsets
        `first_poll_offset` may set), and count them."""
        _reset, strict = FIRST_POLL[self.first_poll_offset]
        for p in partitions:
            tp = (p.topic, p.partition)
            self._offsets.revoke(tp)
            self._offsets.assign(tp)
            self._gens[tp] = next(self._gen_seq)
            if strict and tp not in self._seen:
                p.offset = OFFSET_BEGINNING if self.first_poll_offset == "EARLIEST" else OFFSET_END
            self._seen.add(tp)
        self.counters.add("assigned", len(partitions))

    def _on_revoke(self, consumer: Any, partitions: list) -> None:
        self._let_go({(p.topic, p.partition) for p in partitions})

    def _let_go(self, tps: set[tuple[str, int]]) -> None:
        """Partitions leave this spout: what is done of them is committed, what it holds dropped."""
        self._commit({tp: off for tp, off in self._offsets.to_commit().items() if tp in tps})
        self._drop(tps)
        self.counters.add("revoked", len(tps))

    def _refresh_partitions(self) -> None:
        """"manual" assignment: the topics' partitions, sorted, dealt out over the spout's tasks in
        turn (task i takes the i-th, the (i + tasks)-th, ...); this task takes up its new ones and
        lets go of those no longer its own."""
        c = self._consumer
        topics = c.list_topics(timeout=self.open_timeout_secs).topics
        every = sorted((t, p) for t in self.topics if (md := topics.get(t)) is not None and md.error is None
                       for p in md.partitions)
        tasks = self._context.component_tasks(self.component_id) if self._context is not None else [0]
        mine = set(every[self.task_index::max(1, len(tasks))])
        gone, new = set(self._gens) - mine, mine - set(self._gens)
        if gone:
            self._let_go(gone)
            c.incremental_unassign([TopicPartition(t, p) for t, p in sorted(gone)])
        if new:
            partitions = [TopicPartition(t, p) for t, p in sorted(new)]
            self._own(partitions)
            c.incremental_assign(partitions)

    def _on_lost(self, consumer: Any, partitions: list) -> None:
        self._drop({(p.topic, p.partition) for p in partitions})
        self.counters.add("lost", len(partitions))

    def _drop(self, tps: set[tuple[str, int]]) -> None:
        """Forget what this spout holds of `tps`: records not emitted yet, retries waiting."""
        for tp in tps:
            self._offsets.revoke(tp)
            self._gens.pop(tp, None)
        self._retry_heap = [e for e in self._retry_heap if (e[2].id[0], e[2].id[1]) not in tps]
        heapq.heapify(self._retry_heap)

    # -- the I/O thread: the loop -------------------------------------------------------------

    def _io_serve(self) -> None:
        while not self._closing:
            self._settle()
            now = time.monotonic()
            self._due_retries(now)
            if self._producer is not None:
                self._producer.poll(0)
            if now >= self._next_commit:
                self._next_commit = now + self.commit_interval_secs
                self._commit(self._offsets.to_commit())
            if self.assignment == "manual" and now >= self._next_refresh:
                self._next_refresh = now + self.partition_refresh_secs
                self._refresh_partitions()
            self._poll()
        self._settle()
        if self._producer is not None:
            self._producer.flush(self.open_timeout_secs)
        self._commit(self._offsets.to_commit())

    def _poll(self) -> None:
        c = self._consumer
        limit = self.read_ahead * self._prefetch()
        free = limit - self._offsets.outstanding() + len(self._retry_heap) if self._active else 0
        busy = bool(self._actions or self._holding() or self._dead_inflight)
        if free <= 0:
            now = time.monotonic()
            self._full_since = self._full_since or now
            if now - self._full_since < PAUSE_AFTER_SECS:  # hold on: the client keeps its prefetched records
                self._stop.wait(BUSY_WAIT_SECS)
                return
            if not self._paused:  # full for long: pause, and poll on for rebalances and the poll interval
                c.pause(c.assignment())
                self._paused = True
        else:
            self._full_since = None
            if self._paused:
                c.resume(c.assignment())
                self._paused = False
        n = min(max(free, 1), POLL_MAX)
        msgs = c.consume(n, BUSY_WAIT_SECS if busy or free <= 0 else IDLE_WAIT_SECS)
        if msgs:
            self._take(msgs)

    def _holding(self) -> bool:
        """Whether trees of this spout are in flight (the I/O thread then polls in short steps)."""
        return bool(self._inflight)

    def _take(self, msgs: list) -> None:
        """The records of one consume call: mark them polled, decode them, queue them to emit.
        A poll comes in runs of one partition: each run is marked polled in one call."""
        batch: list[Message] = []
        gens, offsets = self._gens, self._offsets
        run_tp: tuple[str, int] | None = None
        run: list[int] = []
        owned, gen = False, None
        for km in msgs:
            if (err := km.error()) is not None:
                self._record_error(err)
                continue
            topic, partition, offset = km.topic(), km.partition(), km.offset()
            if run_tp is None or partition != run_tp[1] or topic != run_tp[0]:
                if run:
                    offsets.polled_many(run_tp, np.array(run, np.int64))
                run_tp, run = (topic, partition), []
                owned, gen = run_tp in offsets.partitions, gens.get(run_tp)
            if not owned:
                continue  # not (any more) ours: its owner reads it from the committed offset
            run.append(offset)
            batch.append(Message((topic, partition, offset), km.value(), 1, (km.key(), gen), km.headers()))
        if run:
            offsets.polled_many(run_tp, np.array(run, np.int64))
        self.decode_many(batch)
        self._incoming.extend(batch)

    def _record_error(self, err: Any) -> None:
        """A consume call's error "record": fatal ones end the connection (it reconnects)."""
        if err.fatal():
            raise KafkaException(err)
        if err.code() != KafkaError._PARTITION_EOF:
            self._on_client_error(err)

    def committed_offsets(self) -> dict[tuple[str, int], int]:
        """The last offset committed per owned partition (for tests and monitoring)."""
        return {tp: p.committed for tp, p in self._offsets.partitions.items() if p.committed is not None}
