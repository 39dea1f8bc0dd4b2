"""Unit tests of the reliability layer's own logic: ids, the XOR ledger, rotation."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from squall.reliability.anchoring import combine
from squall.reliability.ids import RootIdGenerator, edge_id_int, edge_ids, mix64, mix64_int
from squall.reliability.ledger import AckerLedger, XorLedger

U = np.uint64


def tree(rng, n_edges):
    edges = rng.integers(1, 2**63, n_edges, dtype=np.uint64)
    init = np.bitwise_xor.reduce(edges)
    return init, edges


def test_ids_are_deterministic_nonzero_and_match_scalar_version():
    a = np.array([0, 1, 2**63], dtype=U)
    assert (mix64(a) == np.array([mix64_int(int(x)) for x in a], dtype=U)).all()
    k, e, o, t = (np.arange(1000, dtype=U), np.arange(1000, dtype=U) * U(7), np.arange(1000) % 5,
                  np.arange(1000) % 3)
    ids = edge_ids(k, e, o, t)
    assert (ids != 0).all() and len(set(ids.tolist())) == 1000
    assert (ids == edge_ids(k, e, o, t)).all()  # a re-run gives the same ids
    assert int(ids[17]) == edge_id_int(17, 17 * 7, 17 % 5, 17 % 3)
    g1, g2 = RootIdGenerator(seed=3), RootIdGenerator(seed=3)
    assert (g1.take(5) == g2.take(5)).all() and g1.take_one() == g2.take_one()


@pytest.mark.parametrize("ackers", [1, 3])
def test_trees_complete_when_xor_returns_to_zero(ackers):
    rng = np.random.default_rng(0)
    led = XorLedger(ackers)
    roots = RootIdGenerator(seed=1).take(50)
    inits, acks_r, acks_v = [], [], []
    for r in roots:
        init, edges = tree(rng, 3)
        inits.append(init)
        acks_r += [r] * 3
        acks_v += edges.tolist()
    inits = np.array(inits, dtype=U)
    # all but the last ack of every tree: nothing completes
    ar, av = np.array(acks_r, dtype=U), np.array(acks_v, dtype=U)
    last = np.arange(2, len(ar), 3)
    first = np.setdiff1d(np.arange(len(ar)), last)
    v = led.apply(roots, inits, ar[first], av[first])
    assert len(v.completed) == 0 and len(led) == 50
    v = led.apply(np.zeros(0, U), np.zeros(0, U), ar[last], av[last])
    assert sorted(v.completed.tolist()) == sorted(roots.tolist()) and len(led) == 0
    # late and duplicate acks are ignored
    v = led.apply(np.zeros(0, U), np.zeros(0, U), ar, av)
    assert len(v.completed) == 0 and len(led) == 0


def test_no_subscriber_completes_at_once_and_fail_wins():
    led = AckerLedger()
    roots = RootIdGenerator(seed=2).take(3)
    v = led.apply(roots, np.array([0, 5, 9], dtype=U), np.array([roots[1]], dtype=U), np.array([5], dtype=U),
                  fail_roots=np.array([roots[1], roots[2]], dtype=U))
    assert v.completed.tolist() == [int(roots[0])]  # roots[1] balanced but also failed: fail wins
    assert sorted(v.failed.tolist()) == sorted([int(roots[1]), int(roots[2])])
    assert len(led) == 0


@pytest.mark.parametrize("ackers", [1, 2])
def test_a_tree_started_at_zero_is_held_by_messages_of_the_same_apply(ackers):
    """Every spout edge went to a task that settles whole (edge 0: reliability/settled.py), but
    that task anchored children to tasks that ack them later: its messages hold the tree."""
    led = XorLedger(ackers)
    roots = RootIdGenerator(seed=5).take(4)
    # roots[0]: held by a child (edge 6) still out; roots[1]: a message that balances (complete);
    # roots[2]: failed; roots[3]: no message (complete at once)
    v = led.apply(roots, np.zeros(4, U), np.array([roots[0], roots[1], roots[1]], dtype=U),
                  np.array([6, 3, 3], dtype=U), fail_roots=np.array([roots[2]], dtype=U))
    assert sorted(v.completed.tolist()) == sorted([int(roots[1]), int(roots[3])])
    assert v.failed.tolist() == [int(roots[2])]
    assert len(led) == 1
    v = led.apply(np.zeros(0, U), np.zeros(0, U), np.array([roots[0]], dtype=U), np.array([6], dtype=U))
    assert v.completed.tolist() == [int(roots[0])]
    assert len(led) == 0


def test_rotation_expires_after_two_generations_without_progress():
    led = AckerLedger()
    roots = RootIdGenerator(seed=4).take(2)
    led.apply(roots, np.array([7, 9], dtype=U), np.zeros(0, U), np.zeros(0, U))
    assert len(led.rotate()) == 0
    # progress on roots[1] (a reset_timeout is a zero XOR) keeps it alive one more rotation
    led.apply(np.zeros(0, U), np.zeros(0, U), np.array([roots[1]], dtype=U), np.array([0], dtype=U))
    assert led.rotate().tolist() == [int(roots[0])]
    assert led.rotate().tolist() == [int(roots[1])]
    assert len(led) == 0


def test_stragglers_move_to_the_side_store_and_still_complete():
    led = AckerLedger()
    gen = RootIdGenerator(seed=5)
    straggler = gen.take(1)
    led.apply(straggler, np.array([42], dtype=U), np.zeros(0, U), np.zeros(0, U))
    for _ in range(20):  # many waves of trees that complete, while the straggler stays pending
        roots = gen.take(20000)
        vals = np.arange(1, 20001, dtype=U)
        v = led.apply(roots, vals, roots, vals)
        assert len(v.completed) == 20000
    assert len(led) == 1
    assert led.nbytes < 2_000_000  # the window did not grow with every root ever issued
    v = led.apply(np.zeros(0, U), np.zeros(0, U), straggler, np.array([42], dtype=U))
    assert v.completed.tolist() == straggler.tolist() and len(led) == 0


def test_memory_per_pending_tree():
    led = XorLedger(1)
    gen = RootIdGenerator(seed=6)
    for _ in range(10):
        roots = gen.take(10000)
        led.apply(roots, np.full(10000, 3, dtype=U), np.zeros(0, U), np.zeros(0, U))
    assert len(led) == 100000
    assert led.nbytes / len(led) <= 24


def test_combine_folds_per_root():
    r, v = combine(np.array([5, 3, 5, 3, 9], dtype=U), np.array([1, 2, 4, 8, 16], dtype=U))
    assert r.tolist() == [3, 5, 9] and v.tolist() == [2 ^ 8, 1 ^ 4, 16]


@pytest.mark.parametrize("run", [1, 3, 8])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_combine_equals_a_fold_by_dict_with_runs_and_repeats(run, seed):
    """Messages in runs of one root (a sentence's words) and a root met again later in the
    array (another batch's words): one message per root, the XOR of all of them."""
    rng = np.random.default_rng(zlib.crc32(f"combine-{run}-{seed}".encode()))
    roots = np.repeat(rng.integers(1, 50, 400).astype(U), run)
    vals = rng.integers(0, 2**63, len(roots), dtype=np.int64).astype(U)
    want: dict[int, int] = {}
    for r, v in zip(roots.tolist(), vals.tolist()):
        want[r] = want.get(r, 0) ^ v
    r, v = combine(roots, vals)
    assert dict(zip(r.tolist(), v.tolist())) == want and len(r) == len(want)


@pytest.mark.parametrize("chunks", [1, 3, 40])
def test_each_tree_completes_once_however_many_messages_repeat_its_root(chunks):
    """A root's messages repeat its slot (a word's ack each): every completed tree is reported
    once and the live count stays right, whether a batch completes few trees or most of them."""
    rng = np.random.default_rng(zlib.crc32(b"repeats") + chunks)
    roots = RootIdGenerator(seed=5).take(3000)
    inits, ack_r, ack_v = [], [], []
    for r in roots:
        init, edges = tree(rng, int(rng.integers(1, 13)))
        inits.append(init)
        ack_r += [r] * len(edges)
        ack_v += edges.tolist()
    order = rng.permutation(len(ack_r))
    ar, av = np.array(ack_r, dtype=U)[order], np.array(ack_v, dtype=U)[order]
    led = AckerLedger()
    led.apply(roots, np.array(inits, dtype=U), np.zeros(0, U), np.zeros(0, U))
    seen: list[int] = []
    remaining = {int(r): n for r, n in zip(*np.unique(ar, return_counts=True))}
    for part in np.array_split(np.arange(len(ar)), chunks):
        v = led.apply(np.zeros(0, U), np.zeros(0, U), ar[part], av[part])
        for r in ar[part].tolist():
            remaining[r] -= 1
        done = v.completed.tolist()
        assert len(done) == len(set(done)) and set(done) == {r for r in set(ar[part].tolist()) if remaining[r] == 0}
        seen += done
        assert len(led) == len(roots) - len(seen)
    assert sorted(seen) == roots.tolist() and len(led) == 0


def test_a_run_of_ids_far_ahead_starts_anew_and_both_runs_complete():
    """A spout task made anew counts its roots from another random start, far from the trees of
    its old instance still pending: the window does not grow to span the gap (an allocation of
    terabytes), the old trees move aside, and every tree of both runs still completes."""
    rng = np.random.default_rng(zlib.crc32(b"new-run"))
    led = AckerLedger(1, 0)
    old_roots = RootIdGenerator(seed=5, task=3).take(40)
    new_gen = RootIdGenerator(seed=5, task=3)
    new_gen._next = int(old_roots[0]) + (1 << 45)  # as a random start 2**45 ids further would give
    new_roots = new_gen.take(40)
    trees = {int(r): tree(rng, 3) for r in np.concatenate([old_roots, new_roots])}

    def start(roots):
        led.apply(roots, np.array([trees[int(r)][0] for r in roots], dtype=U), np.zeros(0, U), np.zeros(0, U))

    start(old_roots)
    start(new_roots)
    assert len(led) == 80 and led.nbytes < 1 << 24
    done = []
    for r in np.concatenate([new_roots[::-1], old_roots]):
        edges = trees[int(r)][1]
        done.extend(led.apply(np.zeros(0, U), np.zeros(0, U), np.full(len(edges), r, dtype=U), edges).completed)
    assert sorted(map(int, done)) == sorted(trees) and len(led) == 0


def test_an_owner_made_anew_is_forgotten_by_the_acker():
    from squall.reliability.acker import AckerPartition

    rng = np.random.default_rng(zlib.crc32(b"forget"))
    part = AckerPartition(0, 1)
    roots = RootIdGenerator(seed=7, task=2).take(10)
    part.ledger.apply(roots, np.array([tree(rng, 2)[0] for _ in roots], dtype=U), np.zeros(0, U), np.zeros(0, U))
    assert len(part) == 10
    part.forget_owner(2)
    assert len(part) == 0
