"""Benchmark of the acker's XOR ledger (squall/reliability/ledger.py). Prints one JSON line.

(a) memory: bytes per pending tree with 1,000,000 trees pending (inits applied in batches of
    10,000, random nonzero uint64 init values): `ledger.nbytes / len(ledger)`.
(b) speed: ack messages per second through `XorLedger.apply` on one core. Each wave starts a
    batch of trees of 4 edges (init = XOR of the 4 edge ids) and sends the 4 ack messages of
    every tree in shuffled order, split over two `apply` calls (so some trees complete in the
    first call, most in the second). Only the `apply` calls are timed. Every tree must complete
    and the ledger must be empty at the end.

    .venv/bin/python bench/acker.py [--trees-pending N] [--waves N] [--batch N] [--ackers N]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np

from squall.reliability.ids import RootIdGenerator
from squall.reliability.ledger import XorLedger

EDGES_PER_TREE = 4
BYTES_PER_TREE_GOAL = 24
ACKS_PER_SEC_GOAL = 10_000_000


def random_nonzero(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)
    x[x == 0] = 1
    return x


def bench_memory(pending: int, batch: int, ackers: int) -> dict:
    rng = np.random.default_rng(1)
    ledger = XorLedger(ackers)
    roots = RootIdGenerator(seed=1).take(pending)
    vals = random_nonzero(rng, pending)
    empty = np.zeros(0, np.uint64)
    completed = 0
    for i in range(0, pending, batch):
        v = ledger.apply(roots[i:i + batch], vals[i:i + batch], empty, empty)
        completed += len(v.completed) + len(v.failed)
    assert completed == 0, f"{completed} trees settled with no ack message"
    assert len(ledger) == pending, (len(ledger), pending)
    return {"trees_pending": len(ledger), "ledger_nbytes": ledger.nbytes,
            "bytes_per_tree": ledger.nbytes / len(ledger)}


def make_wave(rng: np.random.Generator, gen: RootIdGenerator, batch: int, split: float):
    """One wave's inputs: roots, inits, and the acks shuffled and cut into two apply calls."""
    roots = gen.take(batch)
    edges = random_nonzero(rng, batch * EDGES_PER_TREE).reshape(batch, EDGES_PER_TREE)
    init = np.bitwise_xor.reduce(edges, axis=1)
    ack_roots = np.repeat(roots, EDGES_PER_TREE)
    ack_vals = edges.ravel()
    order = rng.permutation(len(ack_roots))
    ack_roots, ack_vals = ack_roots[order], ack_vals[order]
    cut = int(len(ack_roots) * split)
    return roots, init, (ack_roots[:cut], ack_vals[:cut]), (ack_roots[cut:], ack_vals[cut:])


def bench_speed(waves: int, batch: int, ackers: int, split: float) -> dict:
    rng = np.random.default_rng(2)
    gen = RootIdGenerator(seed=2)
    ledger = XorLedger(ackers)
    empty = np.zeros(0, np.uint64)
    # Inputs are built before timing so only `apply` is measured.
    inputs = [make_wave(rng, gen, batch, split) for _ in range(waves)]
    perf = time.perf_counter
    secs = 0.0
    acks = 0
    done: list[np.ndarray] = []
    failed = 0
    first_call_done = 0
    for roots, init, (r1, v1), (r2, v2) in inputs:
        t0 = perf()
        a = ledger.apply(roots, init, r1, v1)
        b = ledger.apply(empty, empty, r2, v2)
        secs += perf() - t0
        acks += len(r1) + len(r2)
        done.append(a.completed)
        done.append(b.completed)
        failed += len(a.failed) + len(b.failed)
        first_call_done += len(a.completed)
    all_roots = np.concatenate([w[0] for w in inputs])
    completed = np.concatenate(done)
    ok = (failed == 0 and len(ledger) == 0 and len(completed) == len(all_roots)
          and np.array_equal(np.sort(completed), np.sort(all_roots)))
    return {"acks_per_sec": acks / secs, "ack_messages": acks, "trees_completed": int(len(completed)),
            "trees_completed_in_first_call": first_call_done, "apply_secs": secs, "ledger_empty": len(ledger) == 0,
            "correct": bool(ok)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trees-pending", type=int, default=1_000_000)
    p.add_argument("--init-batch", type=int, default=10_000)
    p.add_argument("--waves", type=int, default=40)
    p.add_argument("--batch", type=int, default=100_000, help="trees per wave in the speed test")
    p.add_argument("--split", type=float, default=0.6, help="share of a wave's acks in its first apply call")
    p.add_argument("--ackers", type=int, default=1)
    args = p.parse_args(argv)

    mem = bench_memory(args.trees_pending, args.init_batch, args.ackers)
    speed = bench_speed(args.waves, args.batch, args.ackers, args.split)
    out = {
        "bench": "acker",
        "ackers": args.ackers,
        "bytes_per_tree": round(mem["bytes_per_tree"], 3),
        "bytes_per_tree_goal": BYTES_PER_TREE_GOAL,
        "trees_pending": mem["trees_pending"],
        "ledger_nbytes": mem["ledger_nbytes"],
        "acks_per_sec": round(speed["acks_per_sec"]),
        "acks_per_sec_goal": ACKS_PER_SEC_GOAL,
        "ack_messages": speed["ack_messages"],
        "edges_per_tree": EDGES_PER_TREE,
        "trees_per_wave": args.batch,
        "waves": args.waves,
        "trees_completed": speed["trees_completed"],
        "trees_completed_in_first_call": speed["trees_completed_in_first_call"],
        "apply_secs": round(speed["apply_secs"], 4),
        "ledger_empty": speed["ledger_empty"],
        "correct": speed["correct"],
        "meets_goals": bool(mem["bytes_per_tree"] <= BYTES_PER_TREE_GOAL
                            and speed["acks_per_sec"] >= ACKS_PER_SEC_GOAL and speed["correct"]),
        "numpy": np.__version__,
        "python": platform.python_version(),
    }
    print(json.dumps(out))
    return 0 if speed["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
