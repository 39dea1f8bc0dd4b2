"""FeederSpout and ack trackers. The cluster runs copies of components; these share their
state with every copy (a copy is the same queue, the same counters), so a test's handle sees
and drives what the running topology does."""

from __future__ import annotations

import collections
import threading
import uuid
from typing import Any

from squall.api.components import Spout


class FeederSpout(Spout):
    """A spout that emits what the test feeds it, each tuple with a msg id (so it is tracked).
    It runs in the driver, where the test feeds it."""

    DRIVER_BOUND = True

    def __init__(self, fields: list[str]):
        self.fields = list(fields)
        self._queue: collections.deque = collections.deque()
        self._delegate: list[Any] = [None]  # shared by copies

    def __deepcopy__(self, memo: dict) -> FeederSpout:
        return self  # every task is the same feeder: one queue

    def set_ack_fail_delegate(self, delegate: Any) -> None:
        self._delegate[0] = delegate

    def feed(self, values: list, msg_id: Any = None) -> Any:
        if msg_id is None:
            msg_id = uuid.uuid4().hex
        self._queue.append((list(values), msg_id))
        return msg_id

    def feed_no_wait(self, values: list, msg_id: Any = None) -> Any:
        return self.feed(values, msg_id)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.fields)

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self._collector = collector

    def next_tuple(self) -> None:
        try:
            values, msg_id = self._queue.popleft()
        except IndexError:
            return
        self._collector.emit(values, msg_id=msg_id)

    def ack(self, msg_id: Any) -> None:
        d = self._delegate[0]
        if d is not None:
            d.ack(msg_id)

    def fail(self, msg_id: Any) -> None:
        d = self._delegate[0]
        if d is not None:
            d.fail(msg_id)


class AckTracker:
    """Counts acks (fails are ignored), as Storm's AckTracker."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._n = 0

    def __deepcopy__(self, memo: dict) -> AckTracker:
        return self

    def ack(self, msg_id: Any) -> None:
        with self._lock:
            self._n += 1

    def fail(self, msg_id: Any) -> None:
        pass

    @property
    def num_acks(self) -> int:
        return self._n

    def get_num_acks(self) -> int:
        return self._n

    def reset(self) -> None:
        with self._lock:
            self._n = 0


class AckFailMapTracker:
    """Remembers which msg ids were acked and which failed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acked: set = set()
        self.failed: set = set()

    def __deepcopy__(self, memo: dict) -> AckFailMapTracker:
        return self

    def ack(self, msg_id: Any) -> None:
        with self._lock:
            self.acked.add(msg_id)

    def fail(self, msg_id: Any) -> None:
        with self._lock:
            self.failed.add(msg_id)

    def is_acked(self, msg_id: Any) -> bool:
        return msg_id in self.acked

    def is_failed(self, msg_id: Any) -> bool:
        return msg_id in self.failed
