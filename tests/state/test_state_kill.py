"""Stateful bolts across real process kills (SQLite state, the default provider).

The stateful word count (tests/support/state_topology.py) runs in a subprocess that the test
SIGKILLs 12 times and restarts under the same topology name, then runs to the end. The kill
points are placed by work done, not by time: the job pauses at the k-th event of a kind (k
drawn from a zlib.crc32-seeded generator) and the test kills it there. The kinds go round: in
the middle of the counting bolt's executes, between a checkpoint's prepare and its commit,
right after a commit (before the acks it releases reach the spout: the window where Storm is
at-least-once), and in the middle of the spout's acks.

After every kill: committed counts never go backward; every sentence the spout recorded as
acked is in the committed state (all its words); the committed state is consistent (each count
equals the number of distinct (sentence, position) keys counted for that word: nothing counted
twice). At the end the counts equal the true counts exactly, every sentence is acked, and some
replayed words were recognised as already committed and not counted again (the kills right
after a commit did land in the window the bolt's (sentence, position) keys close).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import zlib
from collections import Counter
from pathlib import Path

import pytest

from tests.support.state_topology import acked_ids, committed, sentences, true_counts

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "support" / "state_kill_job.py"
N = 2000
KILLS = 12
#: kind -> the range k is drawn from (the k-th event of that kind in the run)
KINDS = {"execute": (100, 1500), "prepare": (1, 6), "commit": (1, 6), "ack": (20, 300)}
HANG_GUARD_SECS = 300


def run_job(state_db: Path, ack_db: Path, kind: str, k: int, err: Path) -> tuple[bool, int]:
    """(killed, words skipped as already committed): one run, SIGKILLed where it pauses."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = done = False
    skips = 0
    with err.open("w") as stderr:
        p = subprocess.Popen([sys.executable, str(JOB), str(state_db), str(ack_db), str(N), kind, str(k)],
                             stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        guard = threading.Timer(HANG_GUARD_SECS, p.kill)
        guard.start()
        try:
            for line in p.stdout:
                word = line.strip()
                if word == "SKIP":
                    skips += 1
                elif word == "PAUSED":
                    p.kill()  # SIGKILL, to the process this test started
                    killed = True
                elif word == "DONE":
                    done = True
            p.wait()
        finally:
            guard.cancel()
            p.stdout.close()
    if not killed and (p.returncode != 0 or not done):
        pytest.fail(f"the job failed (exit {p.returncode}): {err.read_text()[-3000:]}", pytrace=False)
    return killed, skips


def check_committed(state_db: Path, ack_db: Path, before: Counter) -> Counter:
    counts, seen = committed(str(state_db))
    lines = sentences(N)
    back = {w: (n, counts[w]) for w, n in before.items() if counts[w] < n}
    assert not back, f"committed counts went backward (before, after): {back}"
    for sid in acked_ids(str(ack_db)):
        missing = [pos for pos in range(len(lines[sid].split())) if (sid, pos) not in seen]
        assert not missing, f"sentence {sid} was acked but words {missing} of it are not in the committed state"
    per_word = Counter(lines[sid].split()[pos] for sid, pos in seen)
    assert counts == per_word, "a committed count differs from the number of distinct words it counted"
    return counts


@pytest.mark.slow
def test_kills_lose_nothing_committed_and_count_once(tmp_path):
    state_db, ack_db = tmp_path / "state.sqlite", tmp_path / "acks.sqlite"
    rng = random.Random(zlib.crc32(b"state-kill"))
    kinds = list(KINDS)
    counts: Counter = Counter()
    kills = skips = 0
    for i in range(KILLS + 1):
        if i < KILLS:
            kind = kinds[i % len(kinds)]
            k = rng.randint(*KINDS[kind])
        else:
            kind, k = "none", 0
        killed, s = run_job(state_db, ack_db, kind, k, tmp_path / f"job-{i}.err")
        skips += s
        kills += killed
        counts = check_committed(state_db, ack_db, counts)
        assert len(acked_ids(str(ack_db))) < N or i == KILLS, f"run {i} ({kind} {k}) finished everything"
    assert kills == KILLS
    assert len(acked_ids(str(ack_db))) == N
    assert counts == true_counts(N)
    assert skips > 0, "no replayed word was already committed: the kills after a commit did not land in the window"
