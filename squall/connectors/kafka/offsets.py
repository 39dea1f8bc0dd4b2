"""Storm's Kafka offset manager: which offset of a partition may be committed.

A spout emits records out of order of their completion: offset 7 may be acked before 5. The
committed offset is where a restarted consumer resumes, so it must never pass an offset whose
tree is still running or failed (a gap). Per partition we keep one flag per offset from the
first one not done: set while the record is polled and not done yet (acked, or dead-lettered).
The commit offset is the first set flag, or, when none is set, one past the highest polled.
Offsets the log skips (compaction, transaction markers) are never polled, so they never hold
the commit back. The flags are a numpy array, so a column spout marks a whole poll (or a whole
wave's acks) in one call (`polled_many`, `done_many`); the row spout marks each run of one
partition in a poll, or in a wave's acks, the same way.
"""

from __future__ import annotations

import numpy as np

MIN_FLAGS = 1024  # the flag array's first size; it doubles when a poll runs past its end


class PartitionOffsets:
    """The polled-but-not-done offsets of one partition, and the offset safe to commit."""

    __slots__ = ("_base", "_open", "committed", "polled_end")

    def __init__(self, committed: int | None = None):
        self._base = 0  # the offset of _open[0]
        self._open = np.zeros(0, np.bool_)  # _open[i]: offset _base + i is polled and not done
        self.polled_end: int | None = None  # one past the highest polled offset
        self.committed = committed  # the last offset committed (None: nothing yet)

    def _cover(self, lo: int, hi: int) -> None:
        """Make the flags cover offsets lo..hi (a poll's lowest and highest)."""
        if self.polled_end is None:
            self._base = lo
        elif lo < self._base:  # not seen from a consumer (it reads forward), kept correct anyway
            self._open = np.concatenate([np.zeros(self._base - lo, np.bool_), self._open])
            self._base = lo
        need = hi - self._base + 1
        if need > len(self._open):
            grown = np.zeros(max(2 * need, MIN_FLAGS), np.bool_)
            grown[:len(self._open)] = self._open
            self._open = grown
        if self.polled_end is None or hi >= self.polled_end:
            self.polled_end = hi + 1

    def polled(self, offset: int) -> None:
        self._cover(offset, offset)
        self._open[offset - self._base] = True

    def polled_many(self, offsets: np.ndarray) -> None:
        """Mark a poll's offsets of this partition (int64, any order) polled."""
        if len(offsets):
            self._cover(int(offsets.min()), int(offsets.max()))
            self._open[offsets - self._base] = True

    def done(self, offset: int) -> bool:
        """Mark `offset` acked (or dead-lettered); False if it was not outstanding here."""
        i = offset - self._base
        if self.polled_end is None or i < 0 or offset >= self.polled_end or not self._open[i]:
            return False
        self._open[i] = False
        return True

    def done_many(self, offsets: np.ndarray) -> int:
        """Mark these offsets (int64) done; how many of them were outstanding here."""
        if self.polled_end is None or not len(offsets):
            return 0
        i = offsets - self._base
        i = i[(i >= 0) & (offsets < self.polled_end)]
        if not len(i):
            return 0
        span = self._open[int(i.min()):int(i.max()) + 1]  # counted before and after: repeats count once
        before = int(np.count_nonzero(span))
        self._open[i] = False
        return before - int(np.count_nonzero(span))

    @property
    def outstanding(self) -> int:
        """Polled offsets not done yet: what the spout holds of this partition."""
        return int(np.count_nonzero(self._open))

    def commit_offset(self) -> int | None:
        """The next offset to consume after a restart: nothing before it is still to be done.
        None until something was polled."""
        if self.polled_end is None:
            return None
        live = self._open[:self.polled_end - self._base]
        first = int(np.argmax(live)) if len(live) else 0
        if not len(live) or not live[first]:  # nothing outstanding: start afresh past the end
            self._base, self._open = self.polled_end, np.zeros(0, np.bool_)
            return self.polled_end
        if first:  # forget the done prefix (a view; the next growth copies what is left)
            self._base += first
            self._open = self._open[first:]
        return self._base

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

    def polled_many(self, tp: tuple[str, int], offsets: np.ndarray) -> bool:
        """Mark a poll's offsets of `tp` polled; False when `tp` is not assigned here."""
        p = self.partitions.get(tp)
        if p is None:
            return False
        p.polled_many(offsets)
        return True

    def done(self, tp: tuple[str, int], offset: int) -> bool:
        p = self.partitions.get(tp)
        return p is not None and p.done(offset)

    def done_many(self, tp: tuple[str, int], offsets: np.ndarray) -> int:
        p = self.partitions.get(tp)
        return 0 if p is None else p.done_many(offsets)

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
