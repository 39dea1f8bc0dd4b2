"""The lost-wave policy on its own: a job that dies fails its roots the first time, is
bisected when a root lost before is in it again, and a root lost max_replays times is
dead-lettered while the others complete."""

from __future__ import annotations

import numpy as np

from squall.engine.driver.lost_waves import LostWaves
from squall.engine.driver.wave import WaveLost, WaveOutput
from squall.reliability.batch import TupleBatch

POISON = 7


def spout_batch(roots: list[int]) -> TupleBatch:
    n = len(roots)
    off = np.arange(n + 1, dtype=np.int64)
    return TupleBatch("s", "default", ("v",), 1, [[r] for r in roots], off, np.array(roots, np.uint64),
                      np.ones(n, np.uint64))


class Sink:
    def __init__(self):
        self.rows = []

    def write(self, row):
        self.rows.append(row)


def test_a_poison_root_is_isolated_then_dead_lettered():
    sink, dead, jobs = Sink(), [], []

    def run_job(outputs):
        roots = [v[0] for _, b in outputs for v in b.values]
        jobs.append(roots)
        if POISON in roots:
            raise WaveLost("worker died")
        out = WaveOutput()
        out.ack_roots, out.ack_vals = np.array(roots, np.uint64), np.zeros(len(roots), np.uint64)
        return out

    lost = LostWaves("t", max_replays=2, sink=sink, replay_key=lambda task, m: m,
                     dead_letter=lambda root, task, m: dead.append((root, m)), record=lambda errs: None)
    waves = [0]

    def next_wave():
        waves[0] += 1
        return waves[0]

    roots = list(range(1, 11))
    for attempt in (1, 2):
        lost.remember(attempt, "s", 1, roots, [f"m{r}" for r in roots], [[r] for r in roots])
        out = lost.run(run_job, next_wave, [(2, spout_batch(roots))], np.array(roots, np.uint64))
        lost.end_wave(attempt)
        if attempt == 1:  # first loss: every root fails, nobody is suspect yet
            assert sorted(out.fail_roots) == roots and not len(out.ack_roots)
            assert all(r.kind == "lost" for r in out.fail_reasons)
    # second loss: bisected until the poison root is alone; the others complete
    assert sorted(out.ack_roots.tolist()) == [r for r in roots if r != POISON]
    assert out.fail_roots == []
    assert dead == [(POISON, f"m{POISON}")]
    assert sink.rows[0]["msg_id"] == f"m{POISON}" and sink.rows[0]["attempts"] == 2
    assert lost.dead_lettered == 1 and lost.lost_waves >= 3 and waves[0] >= 2
    assert [POISON] in jobs  # isolated in a job of its own
