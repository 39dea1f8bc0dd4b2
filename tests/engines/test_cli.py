"""`squall run` and its progress line (local engine only: fast, no JVM)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from squall.cli import main
from squall.observe.progress import ProgressLine, Sample, format_line, rate, sample_from

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "wordcount.py"


def fake_stats(executed_split=1000, executed_count=9000, acked=900, failed=3, p50=12.5, p99=480.0):
    return {
        "sentences": {"kind": "spout", "tasks": 1, "emitted": 1000, "acked": acked, "failed": failed, "errors": 0,
                      "complete_latency_ms": 20.0, "complete_latency_p50_ms": p50, "complete_latency_p99_ms": p99},
        "split": {"kind": "bolt", "tasks": 2, "emitted": 9000, "acked": 1000, "failed": 0, "errors": 2,
                  "executed": executed_split, "execute_latency_ms": 0.02},
        "count": {"kind": "bolt", "tasks": 2, "emitted": 9000, "acked": 9000, "failed": 0, "errors": 0,
                  "executed": executed_count, "execute_latency_ms": 0.003},
    }


# -- the progress line: pure formatting --------------------------------------------------------


def test_sample_from_sums_bolts_and_spouts():
    s = sample_from(fake_stats(), waves=12, pending=7, errors=2, t=5.0)
    assert s == Sample(t=5.0, waves=12, executed=10_000, acked=900, failed=3, pending=7, p50_ms=12.5, p99_ms=480.0,
                       errors=2)


def test_format_line_shows_every_field():
    s = sample_from(fake_stats(), waves=12, pending=7, errors=2, t=5.0)
    line = format_line(s, tuples_per_sec=181_234.0, elapsed=5.0)
    assert "5.0s" in line
    assert "waves 12" in line
    assert "tuples/s 181k" in line
    assert "acked 900" in line
    assert "failed 3" in line
    assert "pending 7" in line
    assert "p50 12.5ms" in line
    assert "p99 480ms" in line
    assert "errors 2" in line
    assert "\n" not in line


def test_format_line_big_numbers_and_no_latency_yet():
    s = Sample(t=0.0, waves=1520, executed=0, acked=2_345_678, failed=0, pending=4870, p50_ms=None, p99_ms=1500.0,
               errors=0)
    line = format_line(s, tuples_per_sec=1_250_000.0)
    assert "waves 1.52k" in line
    assert "tuples/s 1.25M" in line
    assert "acked 2.35M" in line
    assert "pending 4.87k" in line
    assert "p50 -" in line
    assert "p99 1.50s" in line


def test_rate_is_bolt_executed_per_second_over_the_interval():
    a = sample_from(fake_stats(executed_split=1000, executed_count=9000), 1, 0, 0, t=10.0)
    b = sample_from(fake_stats(executed_split=2000, executed_count=19000), 5, 0, 0, t=10.5)
    assert rate(a, b) == pytest.approx(11_000 / 0.5)
    assert rate(None, b) == 0.0
    assert rate(b, b) == 0.0


class _FakeCoordinator:
    def __init__(self):
        self.waves_done = 0
        self.pending_count = 0
        self.error_count = 0


class _FakeCluster:
    def __init__(self):
        self.coord = _FakeCoordinator()
        self.executed = 0

    def get_topology_stats(self, name):
        assert name == "wc"
        return fake_stats(executed_split=self.executed, executed_count=0)

    def coordinator(self, name):
        return self.coord


def test_progress_line_measures_a_sliding_window():
    now = [100.0]
    cluster = _FakeCluster()
    progress = ProgressLine(cluster, "wc", clock=lambda: now[0], window=5.0)
    progress.update()
    cluster.executed, cluster.coord.waves_done, cluster.coord.pending_count = 5000, 3, 42
    now[0] = 101.0
    progress.update()
    assert progress.tuples_per_sec == pytest.approx(5000)
    now[0] = 102.0  # a long wave: nothing new for a second, the rate is still over the window
    progress.update()
    assert progress.tuples_per_sec == pytest.approx(2500)
    line = progress.line()
    assert "waves 3" in line and "pending 42" in line and "tuples/s 2.5k" in line and "2.0s" in line
    assert progress.render().plain == format_line(progress.last, 2500, progress.last.t - 100.0)
    for t in range(103, 110):  # samples older than the window are dropped
        now[0] = float(t)
        progress.update()
    assert progress.tuples_per_sec == pytest.approx(0)


# -- the example's spout replays failures, a bounded number of times ------------------------------


def _load_example():
    spec = importlib.util.spec_from_file_location("squall_test_example_wordcount", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class _Collector:
    def __init__(self):
        self.emitted = []

    def emit(self, values, msg_id=None, stream="default"):
        self.emitted.append((values, msg_id))
        return []


class _Context:
    this_component_id = "sentences"
    this_task_index = 0

    def component_tasks(self, component_id):
        return [1]


def test_example_spout_replays_failed_sentences_then_gives_up():
    ex = _load_example()
    spout = ex.RandomSentenceSpout(limit=2)
    coll = _Collector()
    spout.open({}, _Context(), coll)
    spout.next_tuple()
    spout.next_tuple()
    spout.next_tuple()  # limit reached
    assert len(coll.emitted) == 2
    (first, m0), (_, m1) = coll.emitted
    words = first[0].split()
    assert ex.MIN_WORDS <= len(words) <= ex.MAX_WORDS and set(words) <= set(ex.WORDS)
    spout.ack(m1)
    for i in range(ex.MAX_RETRIES):
        spout.fail(m0, reason=None)
        spout.next_tuple()
        assert coll.emitted[-1] == (first, m0), f"replay {i + 1} re-emits the same sentence and msg id"
    spout.fail(m0)
    spout.next_tuple()
    assert len(coll.emitted) == 2 + ex.MAX_RETRIES
    assert spout.given_up == 1 and spout.pending == {}


# -- `squall run` ------------------------------------------------------------------------------


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "squall.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_run_wordcount_on_the_local_engine():
    proc = _run("run", "examples/wordcount.py", "--engine", "local", "--seconds", "2")
    out = proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "waves" in out and "tuples/s" in out and "acked" in out
    summary = out[out.index("topology 'wordcount'"):]
    for component in ("sentences", "split", "count"):
        assert component in summary
    assert "Traceback" not in proc.stderr


def test_missing_file_exits_2_with_a_clear_message(capsys):
    assert main(["run", "no/such/topology.py", "--engine", "local"]) == 2
    assert "no such file: no/such/topology.py" in capsys.readouterr().err

    proc = _run("run", "no/such/topology.py", "--engine", "local", "--seconds", "1")
    assert proc.returncode == 2
    assert "no such file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_file_without_build_topology_exits_2(tmp_path, capsys):
    f = tmp_path / "empty_topology.py"
    f.write_text("X = 1\n")
    assert main(["run", str(f), "--engine", "local", "--seconds", "1"]) == 2
    assert "defines no build_topology()" in capsys.readouterr().err
