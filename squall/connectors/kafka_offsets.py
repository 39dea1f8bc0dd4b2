"""Storm's Kafka offset manager: which offset of a partition may be committed.

A spout emits records out of order of their completion: offset 7 may be acked before 5. The
committed offset is where a restarted consumer resumes, so it must never pass an offset whose
tree is still running or failed (a gap). Per partition we keep the polled offsets that are not
done yet (acked, or dead-lettered) in a min-heap: the commit offset is the smallest of them, or,
when none is left, one past the highest polled. Offsets the log skips (compaction, transaction
markers) are never polled, so they never hold the commit back.
"""

from __future__ import annotations

import heapq


class PartitionOffsets:
    """The polled-but-not-done offsets of one partition, and the offset safe to commit."""

    __slots__ = ("_done", "_heap", "committed", "polled_end")

    def __init__(self, committed: int | None = None):
        self._heap: list[int] = []  # polled offsets, lazily deleted when done
        self._done: set[int] = set()  # done offsets still in the heap
        self.polled_end: int | None = None  # one past the highest polled offset
        self.committed = committed  # the last offset committed (None: nothing yet)

    def polled(self, offset: int) -> None:
        heapq.heappush(self._heap, offset)
        if self.polled_end is None or offset >= self.polled_end:
            self.polled_end = offset + 1

    def done(self, offset: int) -> bool:
        """Mark `offset` acked (or dead-lettered); False if it was not outstanding here."""
        if offset in self._done or self.polled_end is None or offset >= self.polled_end:
            return False
        self._done.add(offset)
        return True

    @property
    def outstanding(self) -> int:
        """Polled offsets not done yet: what the spout holds of this partition."""
        return len(self._heap) - len(self._done)

    def commit_offset(self) -> int | None:
        """The next offset to consume after a restart: nothing before it is still to be done.
        None until something was polled."""
        heap, done = self._heap, self._done
        while heap and heap[0] in done:
            done.discard(heapq.heappop(heap))
        if heap:
            return heap[0]
        return self.polled_end

    def to_commit(self) -> int | None:
        """The commit offset if it moved past the last commit, else None."""
        off = self.commit_offset()
        if off is None or (self.committed is not None and off <= self.committed):
            return None
        return off


class OffsetManager:
    """PartitionOffsets per (topic, partition) of the partitions assigned to this consumer."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], PartitionOffsets] = {}

    def assign(self, tp: tuple[str, int]) -> PartitionOffsets:
        p = self.partitions.get(tp)
        if p is None:
            p = self.partitions[tp] = PartitionOffsets()
        return p

    def revoke(self, tp: tuple[str, int]) -> PartitionOffsets | None:
        return self.partitions.pop(tp, None)

    def polled(self, tp: tuple[str, int], offset: int) -> bool:
        p = self.partitions.get(tp)
        if p is None:
            return False
        p.polled(offset)
        return True

    def done(self, tp: tuple[str, int], offset: int) -> bool:
        p = self.partitions.get(tp)
        return p is not None and p.done(offset)

    def outstanding(self) -> int:
        return sum(p.outstanding for p in self.partitions.values())

    def to_commit(self) -> dict[tuple[str, int], int]:
        """Every partition's commit offset that moved since its last commit."""
        out = {}
        for tp, p in self.partitions.items():
            off = p.to_commit()
            if off is not None:
                out[tp] = off
        return out

    def committed(self, offsets: dict[tuple[str, int], int]) -> None:
        for tp, off in offsets.items():
            p = self.partitions.get(tp)
            if p is not None and (p.committed is None or off > p.committed):
                p.committed = off
