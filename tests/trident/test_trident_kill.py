"""Exactly-once across real process kills: the Trident word count is SIGKILLed at random
moments at least 10 times and restarted; at the end every count equals the true count."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.trident_helpers import write_corpus
from tests.support.trident_kill_job import factory

ROOT = Path(__file__).resolve().parents[2]
CI = os.environ.get("CI", "").lower() == "true"
KILLS = 10


def pg_available() -> str | None:
    try:
        import psycopg

        with psycopg.connect(os.environ.get("SQUALL_PG_DSN") or "host=127.0.0.1 port=5432 dbname=test user=postgres",
                             connect_timeout=3):
            return None
    except Exception as e:  # noqa: BLE001
        return str(e).strip().splitlines()[0]


def run_with_kills(args: list[str], rng: random.Random) -> int:
    """Start the job, SIGKILL it at a random moment, KILLS times; then let it finish."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(ROOT / "tests" / "support" / "trident_kill_job.py"), *args]
    kills = 0
    while kills < KILLS:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        assert p.stdout.readline().strip() == "STARTED"
        time.sleep(rng.uniform(0.05, 0.4))
        if p.poll() is not None:  # it finished before the kill: the data is all in; no more kills
            break
        p.send_signal(signal.SIGKILL)
        p.wait()
        kills += 1
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "DONE" in p.stdout
    return kills


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("kind,spout", [("transactional", "file"), ("opaque", "file"), ("opaque", "shifting")])
def test_counts_exact_after_kills(tmp_path, backend, kind, spout):
    if backend == "postgres":
        why = pg_available()
        if why:
            if CI:
                pytest.fail(f"PostgreSQL is required when CI=true: {why}", pytrace=False)
            pytest.skip(f"PostgreSQL unreachable at 127.0.0.1:5432: {why}")
    truth = write_corpus(str(tmp_path / "in"), files=60, lines=200, seed=11)
    target = str(tmp_path / "state.db") if backend == "sqlite" else f"kill_{uuid.uuid4().hex[:10]}"
    rng = random.Random(hash((backend, kind, spout)) & 0xFFFF)
    try:
        kills = run_with_kills([str(tmp_path / "in"), backend, target, kind, spout], rng)
        assert kills >= KILLS
        state = factory(backend, target, kind).make_state({}, 0, 1)
        words = sorted(truth)
        got = state.multi_get([[w] for w in words])
        assert dict(zip(words, got)) == {w: truth[w] for w in words}
    finally:
        if backend == "postgres":
            factory(backend, target, kind).drop()
