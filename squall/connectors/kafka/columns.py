"""KafkaColumnSpout: KafkaSpout for columnar topologies. Each poll goes out as one Arrow batch
(`emit_batch(columns, msg_ids)`, columns "topic", "partition", "offset", "key", "value") with one
tracked row, a tree, per record; no Python object is made per record beyond the client's own.
The rest is KafkaSpout's: the consumer group, commits of the highest contiguous done offset
(flags marked a poll or a wave's acks at a time), retries with backoff, dead letters,
revocation, max spout pending.

- Msg ids are ints, a running row number over the spout's batches, so a wave's acks are found
  with one numpy lookup instead of a dict lookup per record.
- `scheme` "bytes" (value: binary) or "string" (value: utf8, checked in one Arrow cast). A
  record that is not UTF-8, or has no value (a tombstone), is dead-lettered at once with reason
  "decode". Parse JSON in a ColumnarBolt (`pyarrow.json.read_json`), where it is vectorized.
- A failed row is retried alone: after its backoff it goes out again, in a batch of retries and
  with a new msg id; after `max_retries` retries it is dead-lettered, as with KafkaSpout.
- `counters.acked` counts every record acked at the broker; `on_acked(message)` is called per
  record only when a subclass overrides it (it makes a Message per record).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import numpy as np
import pyarrow as pa

from squall.connectors.kafka.spout import FIELDS, KafkaSpout
from squall.connectors.schemes import DecodeError
from squall.connectors.spout import BrokerSpout, Message

COLUMN_SCHEMES = ("bytes", "string")
ACK_ROWS = "ack_rows"  # an action: (ACK_ROWS, batch, rows) acks these rows at the broker
ACKED_ROWS = "acked_rows"  # done: (ACKED_ROWS, batch, (rows acked, rows stale))
NOT_OURS = -1  # the slot of a record whose partition this spout does not own (any more)


class PolledBatch:
    """The records of one poll (or of due retries) as columns, and what acking them needs."""

    __slots__ = ("columns", "live", "n_live", "offsets", "records", "slots", "start")

    def __init__(self, records: list, slots: np.ndarray, offsets: np.ndarray, columns: Any):
        self.records = records  # the client's records (Messages, with their attempts, for retries)
        self.slots = slots  # int32 per row: index of its (topic, partition, assignment) in the spout's table
        self.offsets = offsets  # int64 per row
        self.columns = columns  # pyarrow.RecordBatch of FIELDS
        self.start = -1  # the msg id of row 0, once emitted
        self.live = np.ones(len(offsets), np.bool_)  # rows whose tree is not settled yet
        self.n_live = len(offsets)

    def __len__(self) -> int:
        return len(self.offsets)

    def keep(self, mask: np.ndarray) -> PolledBatch:
        """The rows where `mask` is True."""
        return PolledBatch([r for r, k in zip(self.records, mask.tolist()) if k], self.slots[mask],
                           self.offsets[mask], self.columns.filter(pa.array(mask)))


class KafkaColumnSpout(KafkaSpout):
    """KafkaSpout that emits each poll as one column batch; see the module docstring."""

    read_ahead = 1  # a poll goes out whole, as one batch: what it holds is what it may emit

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if getattr(self.scheme, "_custom", False) or self.scheme.name not in COLUMN_SCHEMES:
            raise ValueError(f"KafkaColumnSpout emits the value column as {' or '.join(COLUMN_SCHEMES)}, not "
                             f"{self.scheme.name!r}: decode it in a ColumnarBolt (JSON: pyarrow.json.read_json), "
                             "or use KafkaSpout for a per-record scheme")
        if self.meta_field:
            raise ValueError("KafkaColumnSpout has no meta_field: its rows carry topic, partition and offset")
        self._multi_topic = len(self.topics) > 1 or any(t.startswith("^") for t in self.topics)

    # -- the spout's side -------------------------------------------------------------------

    def _connect(self) -> None:
        self._slot_keys: list[tuple[str, int, int]] = []  # slot -> (topic, partition, assignment)
        self._slot_of: dict[tuple[str, int, int], int] = {}
        self._slot_lock = threading.Lock()
        self._batches: deque[PolledBatch] = deque()  # polled, not emitted yet (filled by the I/O thread)
        self._live: list[PolledBatch] = []  # emitted, with rows not settled, by start
        self._starts: np.ndarray | None = None  # their starts (None: to compute again)
        self._next_id = 0
        self._hooked = type(self).on_acked is not BrokerSpout.on_acked
        super()._connect()

    def next_tuple(self) -> None:
        if self._done:
            self._finish_done()
        retries = []
        while self._incoming:  # retries due, and records that do not decode
            m = self._incoming.popleft()
            if not self._owned(m):
                self.counters.add("revoked_dropped")
            elif m.error is not None:
                self._undecodable(m)
            else:
                retries.append(m)
        batch = self._retry_batch(retries) if retries else self._next_batch()
        if batch is None:
            return
        batch.start = self._next_id
        self._next_id += len(batch)
        self._live.append(batch)
        self._starts = None
        self._collector.emit_batch(batch.columns, msg_ids=np.arange(batch.start, self._next_id, dtype=np.int64))
        self.counters.emitted += len(batch)

    def _next_batch(self) -> PolledBatch | None:
        """The next polled batch, without the rows of partitions revoked since it was polled."""
        while self._batches:
            batch = self._batches.popleft()
            slots = np.unique(batch.slots)
            owned = np.array([self._owns(s) for s in slots.tolist()], np.bool_)
            if owned.all():
                return batch
            mine = np.isin(batch.slots, slots[owned])
            self.counters.add("revoked_dropped", int(len(batch) - np.count_nonzero(mine)))
            if mine.any():
                return batch.keep(mine)
        return None

    def ack(self, msg_id: Any) -> None:
        self.ack_batch([msg_id])

    def ack_batch(self, msg_ids: list) -> None:
        if self._done:
            self._finish_done()
        found = 0
        for batch, rows in self._rows_of(np.asarray(msg_ids, np.int64)):
            rows = rows[batch.live[rows]]
            if len(rows):
                batch.live[rows] = False
                batch.n_live -= len(rows)
                found += len(rows)
                self._actions.append((ACK_ROWS, batch, rows))
        self.counters.stale += len(msg_ids) - found
        self._forget_settled()
        self._schedule()

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        if self._done:
            self._finish_done()
        got = [(batch, int(rows[0])) for batch, rows in self._rows_of(np.array([msg_id], np.int64)) if len(rows)]
        if not got or not got[0][0].live[got[0][1]]:
            self.counters.stale += 1
            return
        batch, row = got[0]
        batch.live[row] = False
        batch.n_live -= 1
        self._forget_settled()
        self._failed(self._row_message(batch, row), reason)

    def _rows_of(self, ids: np.ndarray) -> list[tuple[PolledBatch, np.ndarray]]:
        """The emitted batches these msg ids belong to, with their rows; unknown ids left out."""
        if self._starts is None:
            self._starts = np.array([b.start for b in self._live], np.int64)
        which = np.searchsorted(self._starts, ids, "right") - 1
        out = []
        for k in np.unique(which).tolist():
            if k < 0:
                continue
            batch = self._live[k]
            rows = ids[which == k] - batch.start
            out.append((batch, rows[rows < len(batch)]))
        return out

    def _forget_settled(self) -> None:
        if any(b.n_live == 0 for b in self._live):
            self._live = [b for b in self._live if b.n_live]
            self._starts = None

    def _row_message(self, batch: PolledBatch, row: int) -> Message:
        """Row `row` of `batch` as a Message (for a retry, a dead letter or the on_acked hook)."""
        rec = batch.records[row]
        if isinstance(rec, Message):
            return rec
        topic, partition, gen = self._slot_keys[batch.slots[row]]
        return Message((topic, partition, int(batch.offsets[row])), rec.value(), 1, (rec.key(), gen), rec.headers())

    def _finish_one(self, kind: str, m: Any, failure: Any) -> None:
        if kind != ACKED_ROWS:
            super()._finish_one(kind, m, failure)
            return
        rows, n_stale = failure
        self.counters.acked += len(rows)
        self.counters.stale += n_stale
        if self._hooked:
            for row in rows.tolist():
                self.on_acked(self._row_message(m, row))

    @property
    def inflight(self) -> int:
        return sum(b.n_live for b in self._live)

    # -- the I/O thread ---------------------------------------------------------------------

    def _holding(self) -> bool:
        return bool(self._live)

    def _slot(self, topic: str, partition: int, gen: int | None) -> int:
        """The slot of (topic, partition) under assignment `gen` (None: not ours), made on first use
        (by either thread: the I/O thread's polls, the spout thread's retries)."""
        if gen is None:
            return NOT_OURS
        key = (topic, partition, gen)
        slot = self._slot_of.get(key)
        if slot is None:
            with self._slot_lock:
                slot = self._slot_of.get(key)
                if slot is None:
                    self._slot_keys.append(key)
                    slot = self._slot_of[key] = len(self._slot_keys) - 1
        return slot

    def _owns(self, slot: int) -> bool:
        """Whether the slot's partition is still assigned to this spout as it was then."""
        topic, partition, gen = self._slot_keys[slot]
        return self._gens.get((topic, partition)) == gen

    def _take(self, msgs: list) -> None:
        """One consume call's records: marked polled, made columns, queued as one batch."""
        if any(km.error() is not None for km in msgs):
            for km in msgs:
                if km.error() is not None:
                    self._record_error(km.error())
            msgs = [km for km in msgs if km.error() is None]
        if not msgs:
            return
        n = len(msgs)
        parts = np.fromiter([km.partition() for km in msgs], np.int32, n)
        offsets = np.fromiter([km.offset() for km in msgs], np.int64, n)
        topics = [km.topic() for km in msgs] if self._multi_topic else None
        slots = self._slots(topics, parts)
        for s in np.unique(slots).tolist():
            if s != NOT_OURS:
                self._offsets.polled_many(self._slot_keys[s][:2], offsets[slots == s])
        batch = self._with_columns(PolledBatch(msgs, slots, offsets, None), topics, parts, [km.key() for km in msgs],
                                   [km.value() for km in msgs], slots != NOT_OURS)
        if len(batch):
            self._batches.append(batch)

    def _slots(self, topics: list[str] | None, parts: np.ndarray) -> np.ndarray:
        """Each record's slot: its partition with the assignment it was polled under."""
        if topics is None:
            topic = self.topics[0]
            table = np.array([self._slot(topic, p, self._gens.get((topic, p))) for p in range(int(parts.max()) + 1)],
                             np.int32)
            return table[parts]
        slot_of = {tp: self._slot(*tp, self._gens.get(tp)) for tp in set(zip(topics, parts.tolist()))}
        return np.array([slot_of[tp] for tp in zip(topics, parts.tolist())], np.int32)

    def _retry_batch(self, ms: list[Message]) -> PolledBatch | None:
        slots = np.array([self._slot(m.id[0], m.id[1], m.handle[1]) for m in ms], np.int32)
        batch = PolledBatch(ms, slots, np.array([m.id[2] for m in ms], np.int64), None)
        batch = self._with_columns(batch, [m.id[0] for m in ms], np.array([m.id[1] for m in ms], np.int32),
                                   [m.handle[0] for m in ms], [m.body for m in ms], None)
        return batch if len(batch) else None

    def _with_columns(self, batch: PolledBatch, topics: list[str] | None, parts: np.ndarray, keys: list,
                      values: list, keep: np.ndarray | None) -> PolledBatch:
        """`batch` with its columns, without the rows `keep` leaves out and those that do not
        decode (they go to the dead letters)."""
        value, bad = self._value_column(values)
        if bad:
            keep = np.ones(len(batch), np.bool_) if keep is None else keep.copy()
            for i, error in bad:
                if keep[i]:
                    m = self._row_message(batch, i)
                    m.error, m.decoded = error, True
                    self._incoming.append(m)  # the spout's thread dead-letters it (reason "decode")
                keep[i] = False
        n = len(batch)
        topic = pa.repeat(self.topics[0], n) if topics is None else pa.array(topics, pa.string())
        batch.columns = pa.RecordBatch.from_arrays(
            [topic, pa.array(parts, pa.int32()), pa.array(batch.offsets, pa.int64()), pa.array(keys, pa.binary()),
             value], names=FIELDS)
        if keep is not None and not keep.all():
            batch = batch.keep(keep)
        return batch

    def _value_column(self, values: list) -> tuple[pa.Array, list[tuple[int, str]]]:
        """The value column by the scheme, and the rows that do not decode (with why)."""
        col = pa.array(values, pa.binary())
        bad = [(i, "record has no value (a tombstone)") for i, v in enumerate(values) if v is None] \
            if col.null_count else []
        if self.scheme.name == "bytes":
            return col, bad
        try:
            return col.cast(pa.string()), bad
        except pa.ArrowInvalid:  # a record that is not UTF-8: find it, say why
            for i, v in enumerate(values):
                if v is not None:
                    try:
                        self.scheme.decode(v)
                    except DecodeError as e:
                        bad.append((i, str(e)))
            bad_rows = {i for i, _ in bad}
            return pa.array([None if i in bad_rows else v for i, v in enumerate(values)], pa.binary()
                            ).cast(pa.string()), bad

    def _settle_one(self, kind: str, m: Any, failure: Any) -> None:
        if kind != ACK_ROWS:
            super()._settle_one(kind, m, failure)
            return
        batch, rows = m, failure
        slots, offsets = batch.slots[rows], batch.offsets[rows]
        mine = np.ones(len(rows), np.bool_)
        for s in np.unique(slots).tolist():
            at = slots == s
            if self._owns(s):
                self._offsets.done_many(self._slot_keys[s][:2], offsets[at])
            else:  # its partition was revoked: the new owner replays it
                mine &= ~at
        self._done.append((ACKED_ROWS, batch, (rows[mine], int(len(rows) - np.count_nonzero(mine)))))

