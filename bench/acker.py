"""Benchmark of the acker's XOR ledger (squall/reliability/ledger.py). Prints one JSON line.

(a) memory: bytes per pending tree with 1,000,000 trees pending (inits applied in batches of
    10,000, random nonzero uint64 init values): `ledger.nbytes / len(ledger)`.
(b) speed: ack messages per second through `XorLedger.apply` on one core. Each wave starts a
    batch of trees of 4 edges (init = XOR of the 4 edge ids) and sends the 4 ack messages of
    every tree in shuffled order, split over two `apply` calls (so some trees complete in the
    first call, most in the second). Only the `apply` calls are timed. Every tree must complete
    and the ledger must be empty at the end.
(c) the driver's whole memory per pending tree, measured, not computed from sizes: a real
    topology on the local engine (public API, simulated time, timeouts disabled, no max pending),
    a spout emitting `--driver-trees` tracked tuples to a bolt that never acks them. First
    `--driver-warmup` trees are emitted and acked (the bolt acks those), so every code path has run
    and nothing is pending; then the N trees are emitted; growth / N is the figure. Two passes:
      - RSS (no tracing): the process's whole resident-memory growth, allocator overhead and the
        msg id objects included (`driver_rss_bytes_per_pending_tree`);
      - tracemalloc: the live Python and numpy allocations, each charged to the innermost Python
        line that made it. What the bench's own spout code allocated and squall keeps (the msg id
        objects: Storm's pending map keeps them too, and their size is the user's choice) is
        reported apart as `spout_msg_id_bytes_per_pending_tree`; the bench's own bookkeeping is
        left out; everything else is the driver's (`driver_bytes_per_pending_tree`), split by
        squall file (`driver_bytes_per_pending_tree_by_file`; "other": allocations made outside
        squall's files), with the top lines on stderr.
    The spout itself keeps nothing per tuple, so there is nothing of the test's own to subtract.

    .venv/bin/python bench/acker.py [--trees-pending N] [--waves N] [--batch N] [--ackers N]
                                    [--driver-trees N] [--driver-warmup N]
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import platform
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

import squall
from squall import Bolt, Config, LocalCluster, Spout, TopologyBuilder
from squall.reliability.ids import RootIdGenerator
from squall.reliability.ledger import XorLedger

EDGES_PER_TREE = 4
BYTES_PER_TREE_GOAL = 24
ACKS_PER_SEC_GOAL = 10_000_000


def say(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)


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


# -- (c) the driver's memory per pending tree, on a running topology -----------------------------

DRIVER_TOPOLOGY = "acker-driver-memory"
DRIVER_SPOUT = "numbers"
IDLE_TIMEOUT_SECS = 600
TOP_LINES = 8

# Read by every copy of the spout (the cluster deep-copies components; a module global is shared).
_GATE: dict[str, Any] = {"left": 0, "next": 1, "warmup": False}


class NumberSpout(Spout):
    """Emits the tuples `release` allows, [n] with msg id n (negative during the warm-up). Keeps
    nothing per tuple, so whatever of it is still alive afterwards is held by squall."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector

    def next_tuple(self) -> None:
        gate = _GATE
        if gate["left"] <= 0:
            return
        gate["left"] -= 1
        n = gate["next"]
        gate["next"] = n + 1
        if gate["warmup"]:
            n = -n
        self.collector.emit([n], msg_id=n)


class WarmupAckBolt(Bolt):
    """Acks the warm-up tuples only; the others it neither acks nor keeps: their trees stay pending."""

    def declare_output_fields(self, declarer: Any) -> None:
        pass

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tuple: Any) -> None:  # noqa: A002 - Storm's parameter name
        if tuple[0] < 0:
            self.collector.ack(tuple)


def release(n: int, warmup: bool) -> None:
    _GATE.update(left=n, warmup=warmup)


def driver_topology() -> tuple[Config, Any]:
    builder = TopologyBuilder()
    builder.set_spout(DRIVER_SPOUT, NumberSpout(), parallelism=1)
    builder.set_bolt("hold", WarmupAckBolt(), parallelism=1).shuffle_grouping(DRIVER_SPOUT)
    conf = Config()
    conf[Config.TOPOLOGY_ACKER_EXECUTORS] = 1
    conf[Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS] = False  # the trees stay pending however long it takes
    conf[Config.TOPOLOGY_MAX_SPOUT_PENDING] = None
    return conf, builder.create_topology()


def driver_pass(trees: int, warmup: int, probe: Callable[[], Any]) -> tuple[Any, Any]:
    """Warm up (trees emitted and acked), probe with nothing pending, emit `trees` that stay
    pending, probe again. Raises if the spout's counts say otherwise."""
    conf, topology = driver_topology()
    with LocalCluster(engine="local", simulated_time=True) as cluster:
        cluster.submit_topology(DRIVER_TOPOLOGY, conf, topology)
        release(warmup, warmup=True)
        cluster.wait_idle(IDLE_TIMEOUT_SECS)
        before = probe()
        release(trees, warmup=False)
        cluster.wait_idle(IDLE_TIMEOUT_SECS)
        after = probe()
        st = cluster.get_topology_stats(DRIVER_TOPOLOGY)[DRIVER_SPOUT]
    want = {"emitted": warmup + trees, "acked": warmup, "failed": 0, "errors": 0}
    got = {k: st[k] for k in want}
    if got != want:
        raise RuntimeError(f"driver memory pass: spout counts {got}, expected {want}")
    return before, after


def rss_bytes() -> int:
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bench_driver_rss(trees: int, warmup: int) -> dict:
    """Whole-process resident growth; run before anything else allocates much, so the growth is
    not hidden in memory that earlier work freed but the allocator kept."""
    if not os.path.exists("/proc/self/statm"):
        return {"rss_bytes_per_tree": None}
    before, after = driver_pass(trees, warmup, rss_bytes)
    return {"rss_bytes_per_tree": (after - before) / trees}


class Attribution:
    """Who made an allocation, from its innermost Python line: a squall file, this bench's spout
    and bolt (`spout`), the rest of this bench (`bench`: its own bookkeeping, such as the first
    probe's figures), or anything else (`other`)."""

    def __init__(self) -> None:
        self.squall_dir = os.path.dirname(os.path.abspath(squall.__file__))
        self.bench_file = NumberSpout.next_tuple.__code__.co_filename
        self.spout_lines: set[int] = set()
        for cls in (NumberSpout, WarmupAckBolt):
            lines, start = inspect.getsourcelines(cls)
            self.spout_lines.update(range(start, start + len(lines)))

    def owner(self, filename: str, lineno: int) -> str:
        if filename == self.bench_file:
            return "spout" if lineno in self.spout_lines else "bench"
        path = os.path.abspath(filename)
        if path.startswith(self.squall_dir + os.sep):
            return "squall/" + os.path.relpath(path, self.squall_dir)
        return "other"

    def sizes(self) -> tuple[Counter, Counter]:
        """Live bytes per owner and per (owner, file:line), from a fresh snapshot."""
        gc.collect()
        snap = tracemalloc.take_snapshot()
        by_owner: Counter = Counter()
        by_line: Counter = Counter()
        for stat in snap.statistics("lineno"):
            frame = stat.traceback[0]
            who = self.owner(frame.filename, frame.lineno)
            by_owner[who] += stat.size
            by_line[(who, f"{frame.filename}:{frame.lineno}")] += stat.size
        return by_owner, by_line


def bench_driver_traced(trees: int, warmup: int) -> dict:
    """tracemalloc growth per pending tree, by owner (one frame per trace: deeper is 3x slower)."""
    attribution = Attribution()
    tracemalloc.start(1)
    try:
        (own0, line0), (own1, line1) = driver_pass(trees, warmup, attribution.sizes)
    finally:
        tracemalloc.stop()
    own1.subtract(own0)
    line1.subtract(line0)
    per_tree = {k: v / trees for k, v in own1.items()}
    spout = per_tree.pop("spout", 0.0)
    per_tree.pop("bench", None)
    say(f"acker: driver memory, top lines by growth per pending tree ({trees:,} trees):")
    for (who, where), size in [kv for kv in line1.most_common() if kv[0][0] != "bench"][:TOP_LINES]:
        say(f"  {size / trees:9.2f} B  {who:<36} {where}")
    return {"bytes_per_tree": sum(per_tree.values()), "by_file": per_tree, "spout_bytes_per_tree": spout}


def _round(x: float | None, nd: int) -> float | None:
    return None if x is None else round(x, nd)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trees-pending", type=int, default=1_000_000)
    p.add_argument("--init-batch", type=int, default=10_000)
    p.add_argument("--waves", type=int, default=40)
    p.add_argument("--batch", type=int, default=100_000, help="trees per wave in the speed test")
    p.add_argument("--split", type=float, default=0.6, help="share of a wave's acks in its first apply call")
    p.add_argument("--ackers", type=int, default=1)
    p.add_argument("--driver-trees", type=int, default=200_000, help="trees left pending in the driver test")
    p.add_argument("--driver-warmup", type=int, default=10_000, help="trees emitted and acked before it")
    args = p.parse_args(argv)

    # The driver passes first, while the process's allocator has no freed memory to hide growth in.
    rss = bench_driver_rss(args.driver_trees, args.driver_warmup)
    traced = bench_driver_traced(args.driver_trees, args.driver_warmup)
    mem = bench_memory(args.trees_pending, args.init_batch, args.ackers)
    speed = bench_speed(args.waves, args.batch, args.ackers, args.split)
    out = {
        "bench": "acker",
        "ackers": args.ackers,
        "bytes_per_tree": round(mem["bytes_per_tree"], 3),
        "bytes_per_tree_goal": BYTES_PER_TREE_GOAL,
        "trees_pending": mem["trees_pending"],
        "ledger_nbytes": mem["ledger_nbytes"],
        "driver_bytes_per_pending_tree": round(traced["bytes_per_tree"], 1),
        "driver_bytes_per_pending_tree_by_file": {k: round(v, 2) for k, v in sorted(traced["by_file"].items())
                                                  if abs(v) >= 0.01},
        "spout_msg_id_bytes_per_pending_tree": round(traced["spout_bytes_per_tree"], 1),
        "driver_rss_bytes_per_pending_tree": _round(rss["rss_bytes_per_tree"], 1),
        "driver_trees_pending": args.driver_trees,
        "driver_warmup_trees": args.driver_warmup,
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
