"""What tasks that outlive a wave would give word count: a bound for a design, not an engine.

squall's bolt tasks (BoltTask, sealing, acking: the code both engines run) stay resident in one
process per core for the whole run, each holding task i % WORKERS of every bolt; the driver feeds
each wave's batches to them over pipes, level by level, and routes what they send on. Up to
--depth waves go through them at once (a wave sends a level's inputs once the wave before it has
sent that level's, so each task takes its waves in order) while the coordinator builds the next.
No Spark, so no recovery: a lost process is not rebuilt. The figure to compare is the Spark
engine's in `bench/wordcount.py` (same example, same max spout pending): what a design keeping
Spark for placement and recovery, with tasks resident between waves, could reach.

    .venv/bin/python bench/resident_tasks.py [--workers 2] [--depth 2] [--seconds 10] [--rounds 2]

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import pickle
import statistics
import sys
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import wordcount  # noqa: E402 - bench/wordcount.py: the example, its corpus and run_case

from squall.api.topology import StormTopology  # noqa: E402
from squall.engine import cluster  # noqa: E402
from squall.engine.local import LocalExecutor  # noqa: E402 - the real one: resident_engine patches cluster's
from squall.engine.sealing import dumps, seal_outputs  # noqa: E402
from squall.engine.wave import WaveOutput  # noqa: E402
from squall.reliability.batch import TupleBatch  # noqa: E402
from squall.reliability.settled import sent_of  # noqa: E402

STOP = b"stop"


def resident(conn: Any, topology: StormTopology, conf: dict, capture: bool, mine: set[int]) -> None:
    """A resident process: its bolt tasks live here; each message is one wave's inputs for some
    of them, answered with what each sent on, its acks and the rest of its result."""
    # the local engine's tasks, made as it makes them; the others are never run, so never prepared
    tasks = {tid: task for tid, task in LocalExecutor(topology, conf, capture).tasks.items() if tid in mine}
    while (msg := conn.recv_bytes()) != STOP:
        wave, now, items = pickle.loads(msg)
        outs = []
        for tid, blobs in items:
            res = tasks[tid].run([pickle.loads(b) for b in blobs], wave, now)
            sealed = seal_outputs(res, to_bytes=True)
            roots = np.concatenate(res.ack_roots) if res.ack_roots else None
            vals = np.concatenate(res.ack_vals) if res.ack_vals else None
            res.outputs, res.ack_roots, res.ack_vals = [], [], []  # sent apart, as bytes and arrays
            outs.append((sealed, roots, vals, res))
        conn.send_bytes(pickle.dumps(outs, protocol=pickle.HIGHEST_PROTOCOL))


class _Link:
    """One resident process's pipe. Requests go out in order and it answers in that order, so a
    reader thread hands each answer to the oldest request waiting: two waves can be out at once."""

    def __init__(self, conn: Any):
        self.conn = conn
        self.waiting: deque[Future] = deque()
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True, name="resident-read").start()

    def ask(self, payload: bytes) -> Future:
        answer: Future = Future()
        with self.lock:
            self.waiting.append(answer)
            self.conn.send_bytes(payload)
        return answer

    def _read(self) -> None:
        while True:
            try:
                msg = self.conn.recv_bytes()
            except (EOFError, OSError):
                return
            self.waiting.popleft().set_result(msg)


class ResidentExecutor:
    """An executor whose bolt tasks live in `workers` resident processes (see the module doc).
    Up to `depth` waves go through them at once: a wave sends a level's inputs once the wave
    before it has sent that level's, so every task gets its waves in order."""

    default_wave_tuples = 2000
    workers = 2
    depth = 2

    def __init__(self, topology: StormTopology, conf: dict, capture: bool = False):
        self.topology = topology
        self.worker_of: dict[int, int] = {}
        mine: list[set[int]] = [set() for _ in range(self.workers)]
        for comp in topology.bolts_in_order:
            for i, tid in enumerate(topology.task_ids[comp]):
                self.worker_of[tid] = i % self.workers
                mine[i % self.workers].add(tid)
        ctx = mp.get_context("fork")
        self.links: list[_Link] = []
        self.procs = []
        for w in range(self.workers):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=resident, args=(there, topology, conf, capture, mine[w]), daemon=True)
            proc.start()
            self.links.append(_Link(here))
            self.procs.append(proc)
        self._pool = ThreadPoolExecutor(max_workers=self.depth, thread_name_prefix="resident-dispatch")
        self._last_sent: list[threading.Event] | None = None  # the previous wave's, per level

    def start(self) -> None:
        pass

    def submit_wave(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int, now: float | None = None) -> Any:
        before, self._last_sent = self._last_sent, [threading.Event() for _ in self.topology.bolts_in_order]
        return _Submitted(self._pool.submit(self._run, spout_outputs, wave, now, before, self._last_sent))

    def run_wave(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int, now: float | None = None) -> WaveOutput:
        return self.submit_wave(spout_outputs, wave, now).result()

    def _run(self, spout_outputs: list[tuple[int, TupleBatch]], wave: int, now: float | None,
             before: list[threading.Event] | None, sent: list[threading.Event]) -> WaveOutput:
        try:
            inbox: dict[int, list[bytes]] = {}
            for target, batch in spout_outputs:
                inbox.setdefault(target, []).append(dumps(batch))
            out = WaveOutput()
            out.sent.extend(sent_of(spout_outputs))
            roots: list[np.ndarray] = []
            vals: list[np.ndarray] = []
            for level, comp in enumerate(self.topology.bolts_in_order):
                per_worker: dict[int, list] = {}
                for tid in self.topology.task_ids[comp]:
                    blobs = inbox.pop(tid, None)
                    if blobs:
                        per_worker.setdefault(self.worker_of[tid], []).append((tid, blobs))
                if before is not None:
                    before[level].wait()
                answers = [self.links[w].ask(pickle.dumps((wave, now, items), protocol=pickle.HIGHEST_PROTOCOL))
                           for w, items in per_worker.items()]
                sent[level].set()
                for answer in answers:
                    for sealed, r, v, res in pickle.loads(answer.result()):
                        for target, blob in sealed:
                            inbox.setdefault(target, []).append(blob)
                        if r is not None:
                            roots.append(r)
                            vals.append(v)
                        out.add_result(res)
            return out.finish(roots, vals)
        finally:
            for event in sent:  # a wave that failed part way holds no later one back
                event.set()

    def stop(self) -> None:
        self._pool.shutdown(wait=True)
        for link in self.links:
            link.conn.send_bytes(STOP)
        for proc in self.procs:
            proc.join(timeout=10)


class _Submitted:
    def __init__(self, future: Future):
        self.future = future

    def result(self) -> WaveOutput:
        return self.future.result()

    def drop(self) -> None:
        self.future.result()


@contextmanager
def resident_engine(workers: int, depth: int) -> Iterator[None]:
    """The local engine's executor replaced by ResidentExecutor for the `with` block."""
    saved = cluster.LocalExecutor
    ResidentExecutor.workers = workers
    ResidentExecutor.depth = depth
    cluster.LocalExecutor = ResidentExecutor
    try:
        yield
    finally:
        cluster.LocalExecutor = saved


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2, help="resident processes (default 2: the cores here)")
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds per case")
    p.add_argument("--rounds", type=int, default=2, help="(acked, no ackers) rounds")
    p.add_argument("--max-pending", type=int, default=50000)
    p.add_argument("--depth", type=int, default=2,
                   help="waves through the resident processes at once (default 2, squall.waves.in.flight's default)")
    args = p.parse_args(argv)
    example = wordcount.load_example()
    wordcount.use_corpus(example, wordcount.CORPUS_SENTENCES, None)
    cases: dict[int, list[dict]] = {1: [], 0: []}
    with resident_engine(args.workers, args.depth):
        for _ in range(args.rounds):
            for ackers in (1, 0):
                cases[ackers].append(wordcount.run_case(example, "local", None, 2, ackers, args.seconds, 5.0,
                                                        args.max_pending, None))
        check = wordcount.sentences_of(example, wordcount.CHECK_SENTENCES)
        errors = wordcount.count_errors(wordcount.expected_counts(check),
                                        wordcount.squall_counts(example, "local", None, 2, check))
    acked = [c["bolt_tuples_per_sec"] for c in cases[1]]
    plain = [c["bolt_tuples_per_sec"] for c in cases[0]]
    cores = [round(sum((c["cpu_cores"] or {}).values()), 2) for c in cases[1]]
    print(json.dumps({
        "workers": args.workers,
        "waves_at_once": args.depth,
        "max_spout_pending": args.max_pending,
        "bolt_tuples_per_sec_acking": [round(r) for r in acked],
        "bolt_tuples_per_sec_no_acking": [round(r) for r in plain],
        "acking_cost_ratio": round(statistics.median(plain) / statistics.median(acked), 3),
        "sentences_per_wave_acking": [round(c["sentences_per_wave"]) for c in cases[1]],
        "cpu_cores_acking": cores,
        "bolt_tuples_per_sec_acking_per_core": round(statistics.median(a / c for a, c in zip(acked, cores) if c)),
        "complete_latency_p99_ms": [None if c.get("p99") is None else round(c["p99"], 1) for c in cases[1]],
        "counts_correct": not errors,
        "counts_check_sentences": len(check),
    }))
    if errors:
        sys.exit("\n".join(errors))


if __name__ == "__main__":
    main()
