"""The pending map hands back, per spout task, the roots it still held with their msg ids and
emit times, aligned, once each."""

from __future__ import annotations

import numpy as np

from squall.reliability.pending import PendingTrees

U64 = np.uint64


def test_popped_roots_come_back_per_task_with_their_msg_ids_and_times_once():
    p = PendingTrees()
    p.add(1, np.arange(100, 105, dtype=U64), ["a0", "a1", "a2", "a3", "a4"], 10.0)
    p.add(2, np.arange(105, 108, dtype=U64), ["b0", "b1", "b2"], 11.0)
    p.add(1, np.arange(108, 110, dtype=U64), ["c0", "c1"], 12.0)
    got = p.pop_many(np.array([109, 101, 106, 104, 999, 108, 3], U64))  # 999 and 3 were never pending
    assert sorted(got) == [1, 2]
    one = got[1]
    assert list(zip(one.roots.tolist(), one.msg_ids, one.times.tolist())) == [
        (101, "a1", 10.0), (104, "a4", 10.0), (108, "c0", 12.0), (109, "c1", 12.0)]  # in root order
    assert list(zip(got[2].roots.tolist(), got[2].msg_ids, got[2].times.tolist())) == [(106, "b1", 11.0)]
    assert len(p) == 10 - 5 and p.count(1) == 3 and p.count(2) == 2
    again = p.pop_many(np.array([101, 109, 100], U64))  # popped ones are gone: only 100 is left of these
    assert again[1].msg_ids == ["a0"] and list(again) == [1]


def test_whole_blocks_come_back_in_order_and_partial_ones_keep_the_rest():
    p = PendingTrees()
    ids = [[f"w{k}-{i}" for i in range(1000)] for k in range(3)]
    for k in range(3):
        p.add(7, np.arange(1000 * k + 1, 1000 * k + 1001, dtype=U64), ids[k], float(k))
    # block 0 whole, block 1 whole but in reverse, block 2 all but its first root (any order given)
    ask = np.concatenate([np.arange(2000, 1000, -1, dtype=U64), np.arange(2002, 3001, dtype=U64)[::-1],
                          np.arange(1, 1001, dtype=U64)])
    got = p.pop_many(ask)[7]
    pairs = dict(zip(got.roots.tolist(), got.msg_ids))
    assert len(pairs) == len(got.msg_ids) == 2999
    assert all(pairs[r] == f"w{(r - 1) // 1000}-{(r - 1) % 1000}" for r in pairs)
    assert dict(zip(got.roots.tolist(), got.times.tolist()))[1500] == 1.0
    assert len(p) == 1 and p.count(7) == 1
    assert p.pop_many(np.array([2001], U64))[7].msg_ids == ["w2-0"]
    assert len(p) == 0 and p.pop_many(np.array([2001], U64)) == {}
    assert ids[2][0] == "w2-0"  # the caller's list is not touched
