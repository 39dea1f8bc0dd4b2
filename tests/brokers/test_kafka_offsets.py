"""Unit tests of Storm's offset manager rule (no broker): the committed offset never passes an
offset whose tree is not done, whatever the order of acks."""

from __future__ import annotations

import random
import zlib

from squall.connectors.kafka.offsets import OffsetManager, PartitionOffsets


def test_nothing_polled_nothing_to_commit():
    p = PartitionOffsets()
    assert p.commit_offset() is None and p.to_commit() is None


def test_out_of_order_acks_never_commit_a_gap():
    p = PartitionOffsets()
    for off in range(10, 15):
        p.polled(off)
    assert p.done(12) and p.done(14)
    assert p.commit_offset() == 10  # 10 and 11 still running
    p.done(10)
    assert p.commit_offset() == 11
    p.done(11)
    assert p.commit_offset() == 13  # 13 still running
    p.done(13)
    assert p.commit_offset() == 15 and p.outstanding == 0


def test_offsets_the_log_skips_do_not_hold_the_commit_back():
    p = PartitionOffsets()
    for off in (3, 4, 8, 9):  # 5..7 never polled: compacted away, or transaction markers
        p.polled(off)
    for off in (4, 9, 3):
        p.done(off)
    assert p.commit_offset() == 8
    p.done(8)
    assert p.commit_offset() == 10


def test_acks_of_unknown_or_repeated_offsets_are_refused():
    p = PartitionOffsets()
    p.polled(0)
    assert not p.done(5)  # never polled
    assert p.done(0)
    assert not p.done(0)  # twice
    assert p.commit_offset() == 1


def test_to_commit_only_when_the_offset_moved():
    p = PartitionOffsets()
    p.polled(0)
    p.polled(1)
    p.done(0)
    assert p.to_commit() == 1
    p.committed = 1
    assert p.to_commit() is None
    p.done(1)
    assert p.to_commit() == 2


def test_manager_per_partition_and_revocation():
    import numpy as np

    m = OffsetManager()
    a, b = ("t", 0), ("t", 1)
    m.assign(a)
    m.assign(b)
    assert m.polled_many(a, np.arange(5, dtype=np.int64)) and m.polled_many(b, np.arange(5, dtype=np.int64))
    for off in (0, 1, 3):
        m.done(a, off)
    m.done(b, 0)
    assert m.to_commit() == {a: 2, b: 1}
    m.committed({a: 2})
    assert m.to_commit() == {b: 1}
    assert m.outstanding() == 2 + 4
    m.revoke(b)
    assert not m.polled_many(b, np.array([5], np.int64)) and not m.done(b, 1)  # not ours any more
    assert m.outstanding() == 2


def test_random_ack_orders_commit_exactly_the_contiguous_prefix():
    """Against a plain model: the commit offset is the first offset not done."""
    for seed in range(50):
        rng = random.Random(zlib.crc32(f"offsets-{seed}".encode()))
        offsets = sorted(rng.sample(range(200), 60))  # with gaps
        p = PartitionOffsets()
        for off in offsets:
            p.polled(off)
        done: set[int] = set()
        for off in rng.sample(offsets, len(offsets)):
            p.done(off)
            done.add(off)
            first_open = next((o for o in offsets if o not in done), offsets[-1] + 1)
            assert p.commit_offset() == first_open, (seed, off)


def test_whole_polls_and_whole_waves_of_acks_agree_with_one_offset_at_a_time():
    """polled_many / done_many (the column spout's) against polled / done (the row spout's), over
    random polls with gaps and random ack orders: same commit offsets, same outstanding counts."""
    import numpy as np

    for seed in range(30):
        rng = random.Random(zlib.crc32(f"many-{seed}".encode()))
        offsets = sorted(rng.sample(range(5000), 1500))
        bulk, one = PartitionOffsets(), PartitionOffsets()
        polls = [offsets[i:i + rng.randint(1, 300)] for i in range(0, len(offsets), 150)]
        pending: list[int] = []
        for poll in polls:
            poll = [o for o in poll if one.polled_end is None or o >= one.polled_end]  # a consumer reads forward
            bulk.polled_many(np.array(poll, np.int64))
            for off in poll:
                one.polled(off)
            pending += poll
            rng.shuffle(pending)
            acked, pending = pending[:len(pending) // 2], pending[len(pending) // 2:]
            assert bulk.done_many(np.array(acked + acked[:3], np.int64)) == len(acked)  # repeats not counted
            for off in acked:
                assert one.done(off)
            assert bulk.commit_offset() == one.commit_offset(), seed
            assert bulk.outstanding == one.outstanding == len(pending)
        assert bulk.done_many(np.array(pending, np.int64)) == len(pending)
        assert bulk.commit_offset() == one.polled_end and bulk.outstanding == 0


def test_flags_grow_and_shrink_with_what_is_outstanding():
    """A long stream keeps only the flags from the first offset not done: memory follows what
    is in flight, not the partition's length."""
    import numpy as np

    p = PartitionOffsets()
    for start in range(0, 1_000_000, 10_000):
        p.polled_many(np.arange(start, start + 10_000, dtype=np.int64))
        p.done_many(np.arange(start, start + 10_000, dtype=np.int64))
        assert p.commit_offset() == start + 10_000
    assert len(p._open) <= 20_000  # noqa: SLF001 - the point of the test


def test_a_waves_acks_are_done_a_partition_run_at_a_time_and_revoked_ones_are_stale():
    """KafkaSpout's I/O thread settles a wave's acks in one action: each run of one partition is
    marked done at once, in any order of partitions, and an ack of a record polled under an
    earlier assignment of its partition is handed back as stale (the new owner replays it)."""
    from collections import deque

    import numpy as np

    from squall.connectors.io_thread import STALE
    from squall.connectors.kafka.spout import KafkaSpout
    from squall.connectors.spout import Message

    spout = KafkaSpout("127.0.0.1:1", ["t"])  # never opened: no broker is needed to settle
    spout._offsets, spout._done = OffsetManager(), deque()  # noqa: SLF001 - what _connect makes
    spout._gens = {("t", 0): 1, ("t", 1): 2}  # noqa: SLF001 - partition 1 was reassigned (generation 2)
    for p, first in ((0, 0), (1, 10)):
        spout._offsets.assign(("t", p))  # noqa: SLF001
        spout._offsets.polled_many(("t", p), np.arange(first, first + 6, dtype=np.int64))  # noqa: SLF001

    def record(p: int, offset: int, gen: int) -> Message:
        return Message(("t", p, offset), b"", 1, (None, gen))

    wave = [record(0, 1, 1), record(0, 0, 1), record(0, 2, 1), record(1, 10, 2), record(1, 11, 1), record(0, 4, 1)]
    acked = spout._settle_acks(wave)  # noqa: SLF001
    assert [m.id for m in acked] == [("t", 0, 1), ("t", 0, 0), ("t", 0, 2), ("t", 1, 10), ("t", 0, 4)]
    assert [(kind, m.id) for kind, m, _ in spout._done] == [(STALE, ("t", 1, 11))]  # noqa: SLF001
    assert spout._offsets.to_commit() == {("t", 0): 3, ("t", 1): 11}  # noqa: SLF001 - 3 and 11 still running
