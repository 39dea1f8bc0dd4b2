"""Column spouts for the queue brokers: what the I/O thread has received goes out as one Arrow
batch per `next_tuple` call (`emit_batch(columns, msg_ids)`), each message still its own tree.

On the tuple path a spout pays the engine's per-tuple cost on the driver (an emit, a tuple to
pickle, a value to decode), on the same GIL as the broker client's own I/O thread, and that
caps the spout below what the client alone consumes. A column spout emits one batch per call:
the payloads as one column, decoded in the bolts (`pyarrow.json.read_json`, vectorized). The
rest is the broker spout's: acks at the broker once a tree is acked, retries, dead letters,
max spout pending.

- `scheme` "string" (column type utf8; a payload that is not UTF-8 is dead-lettered at once with
  reason "decode", as with the tuple spout) or "bytes" (binary). Parse JSON in a ColumnarBolt.
- The column is named after the one declared field: `fields=("value",)` by default, the name
  KafkaColumnSpout uses.
- No `meta_field`: the broker's message id is the row's msg id (what `ack`/`fail` get).
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from squall.connectors.io_thread import IOThreadBrokerSpout
from squall.connectors.spout import BrokerSpout, Message

COLUMN_SCHEMES = {"bytes": pa.binary(), "string": pa.string()}
MAX_BATCH_ROWS = 20000  # rows per emitted batch, at most


class ColumnSpoutMixin(IOThreadBrokerSpout):
    """Put before a broker spout class (`class X(ColumnSpoutMixin, RabbitMQSpout)`): emits what
    it has received as column batches; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("fields", ("value",))
        super().__init__(*args, **kwargs)
        name = type(self).__name__
        if getattr(self.scheme, "_custom", False) or self.scheme.name not in COLUMN_SCHEMES:
            raise ValueError(f"{name} emits the payload column as {' or '.join(COLUMN_SCHEMES)}, not "
                             f"{self.scheme.name!r}: decode it in a ColumnarBolt (JSON: pyarrow.json.read_json), "
                             "or use the tuple spout for a per-message scheme")
        if self.meta_field:
            raise ValueError(f"{name} has no meta_field: a row's msg id is its broker id")
        self._arrow_type = COLUMN_SCHEMES[self.scheme.name]

    def decode(self, m: Message) -> None:
        """Called per message on the connection's thread: only a missing payload is caught here;
        the payloads are checked a batch at a time, in `_column` (one Arrow cast)."""
        if m.body is None:
            m.error = self._no_payload(m)
        m.decoded = True

    def next_tuple(self) -> None:
        if self._done:
            self._finish_done()
        # the payloads are checked in _column, a batch at a time
        taken = self._take_decoded(self._emit_room(MAX_BATCH_ROWS))
        column = self._column(taken) if taken else None
        if column is None:
            return
        now = time.monotonic()
        for m in taken:
            m.emitted_at = m.touched_at = now
        ids = [m.id for m in taken]
        self._inflight.update(zip(ids, taken))
        self._collector.emit_batch(pa.record_batch([column], names=self.fields), msg_ids=ids)
        self.counters.emitted += len(taken)

    def _column(self, taken: list[Message]) -> pa.Array | None:
        """The payloads of `taken` as one column. A payload that is not UTF-8 (scheme "string")
        is dead-lettered and its message dropped from `taken`, in place; None if none is left."""
        try:  # as utf8, Arrow checks the payloads (faster than binary, then a cast)
            return pa.array([m.body for m in taken], self._arrow_type)
        except pa.ArrowInvalid:  # some row is not UTF-8: find which, by the tuple spout's decode
            pass
        good: list[Message] = []
        for m in taken:
            BrokerSpout.decode(self, m)
            if m.error is None:
                good.append(m)
            else:
                self._undecodable(m)
        taken[:] = good
        return pa.array([m.value for m in good], pa.string()) if good else None
