"""What a KafkaSpout's I/O thread does with the spout's acks, retries and dead letters, and
how it commits: the half of the spout that settles records, apart from the half that polls them.

A wave's acks come as one action (ACKS) and are marked done a run of one partition at a time;
an ack of a record whose partition was revoked since is stale (its new owner replays it). A
retry waits out its backoff in a heap; a dead letter goes to `dead_letter_topic` (confirmed by
the broker before the record counts as done) or to the topology's dead-letter sink.
"""

from __future__ import annotations

import heapq
import time
from typing import Any

import numpy as np
from confluent_kafka import KafkaException, TopicPartition

from squall.connectors.dead_letters import Failure
from squall.connectors.io_thread import ACKED, DEAD, REPORT, STALE
from squall.connectors.kafka.common import b64, kafka_error_text
from squall.connectors.spout import Message

ACKS = "acks"  # an action: (ACKS, messages, None) acks a wave's records at once


class KafkaSettling:
    """KafkaSpout's settling, on its I/O thread (a mixin: the spout holds the state it uses)."""

    _gens: dict
    _offsets: Any
    _done: Any

    def _due_retries(self, now: float) -> None:
        heap = self._retry_heap
        while heap and heap[0][0] <= now:
            m = heapq.heappop(heap)[2]
            m.attempts += 1
            self._incoming.append(m)
        while self._dead_retry and self._dead_retry[0][0] <= now:
            _due, m, failure = self._dead_retry.pop(0)
            self._send_dead_letter(m, failure)

    def _backoff(self, attempts: int) -> float:
        return min(self.max_retry_delay_secs, self.retry_delay_secs * 2 ** max(0, attempts - 1))

    def _ack_messages(self, ms: list[Message]) -> None:
        self._act((ACKS, ms, None))  # a wave's acks, settled together on the I/O thread

    def _settle(self) -> None:
        actions, acked = self._actions, []
        while actions:
            kind, m, failure = actions.popleft()
            if kind == ACKS:
                acked += self._settle_acks(m)
            else:
                self._settle_one(kind, m, failure)
        if acked:  # handed back in one list
            self._done.append((ACKED, acked, None))

    def _settle_acks(self, ms: list[Message]) -> list[Message]:
        """Mark acked records done, a run of one partition at a time; the ones of a partition
        revoked since (its new owner replays them) are handed back as stale."""
        gens, offsets, done = self._gens, self._offsets, self._done
        acked: list[Message] = []
        run_tp: tuple[str, int] | None = None
        run: list[int] = []
        for m in ms:
            topic, partition, offset = m.id
            if run_tp is None or partition != run_tp[1] or topic != run_tp[0]:
                if run:
                    offsets.done_many(run_tp, np.array(run, np.int64))
                run_tp, run = (topic, partition), []
            if gens.get(run_tp) != m.handle[1]:
                done.append((STALE, m, None))
                continue
            run.append(offset)
            acked.append(m)
        if run:
            offsets.done_many(run_tp, np.array(run, np.int64))
        return acked

    def _settle_one(self, kind: str, m: Any, failure: Failure | None) -> None:
        """Carry out one action the spout's thread handed over: a retry or a dead letter (acks
        come as lists, ACKS)."""
        if self._gens.get((m.id[0], m.id[1])) != m.handle[1]:
            self._done.append((STALE, m, None))  # its partition was revoked: the new owner replays it
        elif kind == self.RETRY_ACTION:
            due = time.monotonic() + self._backoff(m.attempts)
            heapq.heappush(self._retry_heap, (due, next(self._seq), m))
        else:
            self._send_dead_letter(m, failure)

    def _send_dead_letter(self, m: Message, failure: Failure) -> None:
        topic, partition, offset = m.id
        fields = failure.fields(topic, f"{partition}:{offset}")
        if self._producer is None:
            self._sink.write({"component": self.component_id, "task": self.task_index, "topic": topic,
                              "partition": partition, "offset": offset, **fields,
                              "key_base64": b64(m.handle[0]), "value_base64": b64(m.body)})
            self._dead_done(m, failure)
            return
        headers = list(m.headers or []) + [(k, v.encode()) for k, v in fields.items()]
        self._dead_inflight += 1

        def delivered(err: Any, _msg: Any) -> None:
            self._dead_inflight -= 1
            if err is None:
                self._dead_done(m, failure)
                return
            self._done.append((REPORT, f"dead-lettering {m.id} to {self.dead_letter_topic!r} failed "
                                       f"({kafka_error_text(err)}); trying again", None))
            self._dead_retry.append((time.monotonic() + 1.0, m, failure))

        self._producer.produce(self.dead_letter_topic, value=m.body, key=m.handle[0], headers=headers,
                               on_delivery=delivered)

    def _dead_done(self, m: Message, failure: Failure) -> None:
        tp = (m.id[0], m.id[1])
        if self._gens.get(tp) == m.handle[1]:
            self._offsets.done(tp, m.id[2])
        self._done.append((DEAD, m, failure))

    def _commit(self, offsets: dict[tuple[str, int], int]) -> None:
        if not offsets or self._consumer is None:
            return
        try:
            self._consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                  asynchronous=False)
        except KafkaException as e:  # e.g. a rebalance in progress: the next commit tries again
            self._done.append((REPORT, f"committing offsets {offsets} failed: {kafka_error_text(e.args[0])}", None))
            return
        self._offsets.committed(offsets)
        self.counters.add("commits")
