"""HeldStore, our own logic (no engine): rows keep their values and anchors through
consolidation and release, and anchoring many rows then acking them balances every tree."""

from __future__ import annotations

import pickle
import zlib

import numpy as np

from squall.reliability.anchoring import Contributions, anchor_edges, combine, keys_of
from squall.reliability.batch import TupleBatch
from squall.reliability.bolt_trees import store_anchor_edges
from squall.reliability.held import ACKED, FAILED, HeldRows, HeldStore, as_run
from squall.reliability.tuple import tuples_of

_U64 = np.uint64


def batch(n: int, seed: int, roots_per_row=(0, 1, 2, 3)) -> TupleBatch:
    """n rows, each with 0..3 roots (0: untracked), values ["v<seed>-<i>"]."""
    rng = np.random.default_rng(zlib.crc32(f"held-{seed}".encode()))
    counts = rng.choice(roots_per_row, n)
    off = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=off[1:])
    roots = rng.integers(1, 1 << 40, int(off[-1]), dtype=np.uint64)
    vals = rng.integers(1, 1 << 63, int(off[-1]), dtype=np.uint64)
    return TupleBatch("src", "default", ("v",), 1, [[f"v{seed}-{i}"] for i in range(n)], off, roots, vals)


def held(batches):
    store, expect = HeldStore(), []
    seq = 0
    for b in batches:
        for t in tuples_of(b):
            if t._i % 3 == 2:
                continue  # not every row of a batch is held
            seq += 1
            store.add(t, seq, seq * 10)
            expect.append((t.values, *b.anchors_of(t._i)))
            assert t._done == 3  # the task no longer holds it
    store.consolidate()
    return store, expect


def rows_of(store):
    return [(store.values[r], *(a[store.off[r]:store.off[r + 1]] for a in (store.root, store.val)))
            for r in range(len(store))]


def same(got, expect):
    assert len(got) == len(expect)
    for (gv, gr, ga), (ev, er, ea) in zip(got, expect):
        assert gv == ev and gr.tolist() == er.tolist() and ga.tolist() == ea.tolist()


def test_rows_keep_values_and_anchors_through_consolidate_and_release():
    store, expect = held([batch(40, 1), batch(25, 2)])
    same(rows_of(store), expect)
    gone = np.arange(0, len(store), 4)
    store.gone[gone] = True
    store.release()
    same(rows_of(store), [e for i, e in enumerate(expect) if i % 4])
    assert store.seq.tolist() == [s for i, s in enumerate(range(1, len(expect) + 1)) if i % 4]


def test_anchoring_many_rows_then_acking_balances_every_tree():
    b = batch(300, 3, roots_per_row=(1, 2))
    store, _ = held([b])
    # what the spout started: per root, the XOR of the edges its held rows carry
    init_r, init_v = combine(store.root.copy(), store.val.copy())
    rows = np.flatnonzero(store.seq % 2 == 0)
    children = np.array([0, 1])  # one emit to two target tasks
    contrib = store_anchor_edges(HeldRows(store, rows), children, np.array([4, 7]), 99, 0).merged(2)
    assert (store.out[rows] != 0).all() and (store.out[store.seq % 2 == 1] == 0).all()
    assert store.ack(np.arange(len(store))) == len(store)
    r, v, fails, acked, failed = store.take_messages()
    assert (acked, failed, fails) == (len(store), 0, [])
    allr = np.concatenate([init_r, r, contrib.root])  # the children are acked downstream
    allv = np.concatenate([init_v, v, contrib.val])
    _, xor = combine(allr, allv)
    assert (xor == 0).all()


def test_a_missing_child_ack_leaves_exactly_the_anchored_trees_open():
    store, _ = held([batch(50, 4, roots_per_row=(1,))])
    init_r, init_v = combine(store.root.copy(), store.val.copy())
    rows = np.array([3, 7, 11])
    store_anchor_edges(HeldRows(store, rows), np.array([0]), np.array([2]), 5, 0)
    store.ack(np.arange(len(store)))
    r, v, *_ = store.take_messages()
    roots, xor = combine(np.concatenate([init_r, r]), np.concatenate([init_v, v]))
    assert sorted(roots[xor != 0].tolist()) == sorted(store.root[rows].tolist())


def test_ack_and_fail_settle_each_row_once():
    store, _ = held([batch(30, 5, roots_per_row=(1,))])
    assert store.fail(np.array([0, 1]), "why") == 2
    assert store.ack(np.array([0, 1, 2])) == 1  # failed rows are not acked
    assert store.fail(np.array([2]), "x") == 0  # nor an acked one failed
    assert store.done[:3].tolist() == [FAILED, FAILED, ACKED]
    _, _, fails, acked, failed = store.take_messages()
    assert (acked, failed) == (1, 2)
    assert fails[0][1] == "why" and sorted(fails[0][0].tolist()) == sorted(store.root[[0, 1]].tolist())
    store.release()
    assert len(store) == 18 and len(store.off) == 19  # 20 held (every third row is not), 2 failed


def test_a_held_row_costs_at_most_64_bytes_beyond_its_values():
    store, _ = held([batch(30_000, 6, roots_per_row=(1,))])
    assert len(store) == 20_000
    assert store.nbytes() / len(store) <= 64


def test_a_batch_held_at_once_is_the_same_as_row_by_row():
    """add_batch (the engine's bulk path) keeps exactly what add keeps for every row."""
    b1, b2 = batch(40, 7), batch(25, 8)
    one = HeldStore()
    seq = 0
    for b in (b1, b2):
        for t in tuples_of(b):
            seq += 1
            one.add(t, seq, 500)
    one.consolidate()
    bulk = HeldStore()
    bulk.add_batch(b1, 0, 500)
    bulk.add_batch(b2, len(b1), 500)
    same(rows_of(bulk), rows_of(one))
    for col in ("off", "src", "seq", "ts", "out", "done", "flag", "gone"):
        assert getattr(bulk, col).tolist() == getattr(one, col).tolist(), col


def test_a_run_of_rows_is_told_from_any_other_rows():
    assert as_run(np.array([4, 5, 6, 7])) == (4, 8)
    assert as_run(np.array([9])) == (9, 10)
    for rows in ([], [3, 5, 4, 6], [3, 3, 5], [2, 4], [5, 4]):  # a permutation, a repeat, a gap, backwards
        assert as_run(np.array(rows, np.int64)) is None, rows


def test_edges_to_held_rows_follow_the_pairwise_rule():
    """store_anchor_edges (one mix per child, slices for a run of rows) gives the edges, out values
    and child contributions of the general per-pair rule, for rows with 0 to 3 roots."""
    for rows in (np.arange(5, 35), np.array([0, 3, 4, 9, 30, 31])):
        for children, targets in ((np.array([0]), np.array([3])), (np.array([1, 2]), np.array([0, 5, 6]))):
            store, _ = held([batch(60, 9)])
            sub = store.sub_anchors(rows)
            keys = keys_of(sub, 0)
            n, k = len(rows), len(children)
            out = np.zeros(n, _U64)
            expect = anchor_edges(sub, keys, np.tile(np.arange(n), k), np.repeat(children, n),
                                  np.full(n * k, _U64(77)), np.full(n * k, 2, np.int64),
                                  targets[np.repeat(children, n)], out).merged(3)
            got = store_anchor_edges(HeldRows(store, rows), children, targets, 77, 2).merged(3)
            assert got.off.tolist() == expect.off.tolist()
            assert got.root.tolist() == expect.root.tolist() and got.val.tolist() == expect.val.tolist()
            assert store.out[rows].tolist() == out.tolist()


def test_folding_contributions_xors_each_childs_repeated_roots():
    rng = np.random.default_rng(zlib.crc32(b"fold"))
    for n in (1, 7, 200, 3000):
        child = np.sort(rng.integers(0, 5, n))
        root = np.repeat(rng.integers(1, 12, max(n // 3, 1)).astype(_U64), 3)[:n]  # neighbours repeat, as words do
        if len(root) < n:
            root = np.concatenate([root, np.ones(n - len(root), _U64)])
        val = rng.integers(1, 1 << 63, n, dtype=np.uint64)
        expect: dict[tuple[int, int], int] = {}
        for c, r, v in zip(child.tolist(), root.tolist(), val.tolist()):
            expect[(c, r)] = expect.get((c, r), 0) ^ v
        got = Contributions(child, root, val).folded()
        assert list(zip(got.child.tolist(), got.root.tolist())) == sorted(expect)
        assert got.val.tolist() == [expect[key] for key in sorted(expect)]


def test_row_keys_are_kept_until_the_next_release_and_match_their_rows():
    store = HeldStore()
    store.add_batch(batch(30, 10, roots_per_row=(1, 2)), 0, 0)
    first = store.keys(np.arange(30))
    store.add_batch(batch(20, 11, roots_per_row=(1, 3)), 30, 0)  # more rows: their keys join the kept ones
    for rows in (np.arange(50), np.array([2, 31, 49])):
        assert store.keys(rows).tolist() == keys_of(store.sub_anchors(rows), 0).tolist()
    assert store.keys(np.arange(30)).tolist() == first.tolist()
    store.gone[:10] = True
    store.release()  # positions change: keys are computed again for the rows now there
    assert store.keys(np.arange(40)).tolist() == keys_of(store.sub_anchors(np.arange(40)), 0).tolist()
    assert pickle.loads(pickle.dumps(store))._keys is None  # not carried with the state
