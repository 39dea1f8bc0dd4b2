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
        (101, "a1", 10.0), (104, "a4", 10.0), (109, "c1", 12.0), (108, "c0", 12.0)]
    assert list(zip(got[2].roots.tolist(), got[2].msg_ids, got[2].times.tolist())) == [(106, "b1", 11.0)]
    assert len(p) == 10 - 5 and p.count(1) == 3 and p.count(2) == 2
    again = p.pop_many(np.array([101, 109, 100], U64))  # popped ones are gone: only 100 is left of these
    assert again[1].msg_ids == ["a0"] and list(again) == [1]
