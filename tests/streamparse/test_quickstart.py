"""streamparse's quickstart project (`sparse quickstart wordcount`), with its one changed import
line, runs on both engines with the same results as the same topology in squall's native API,
and `squall run` recognizes it."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import cycle
from pathlib import Path

from squall import Bolt, Config, LocalCluster, Spout, TopologyBuilder
from squall.cli import load_topology_module
from squall.streamparse.project import ship_by_value, topology_class

PROJECT = Path(__file__).resolve().parent / "wordcount_project"
TOPOLOGY_FILE = PROJECT / "topologies" / "wordcount.py"
WAVES = 6
PER_WAVE = 250  # the spout emits exactly this many words a wave (no time limit: see CONF)
# squall is installed in the venv; a PYTHONPATH left by an earlier Spark test (the driver's sys.path,
# which may hold the project's src/) must not make the project importable by accident
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
# waves one at a time: the runs step a fixed number of waves and compare what each settled
CONF = Config({Config.SQUALL_WAVE_MAX_TUPLES: PER_WAVE, Config.SQUALL_WAVE_MAX_SECS: 3600,
               Config.SQUALL_WAVES_IN_FLIGHT: 1})


class NativeWordSpout(Spout):
    def declare_output_fields(self, d):
        d.declare(["word"])

    def open(self, conf, context, collector):
        self.collector, self.words = collector, cycle(["dog", "cat", "zebra", "elephant"])

    def next_tuple(self):
        self.collector.emit([next(self.words)])


class NativeWordCountBolt(Bolt):
    def declare_output_fields(self, d):
        d.declare(["word", "count"])

    def prepare(self, conf, context, collector):
        self.collector, self.counter = collector, {}

    def execute(self, t):
        word = t["word"]
        self.counter[word] = self.counter.get(word, 0) + (10 if word == "dog" else 1)
        self.collector.emit([word, self.counter[word]], anchors=t)
        self.collector.ack(t)


def native_topology():
    b = TopologyBuilder()
    b.set_spout("word_spout", NativeWordSpout())
    b.set_bolt("count_bolt", NativeWordCountBolt(), parallelism=2).fields_grouping("word_spout", ["word"])
    return b.create_topology()


def run_waves(cluster_kwargs, topology):
    """What count_bolt emitted, per task, and the stats, after WAVES waves."""
    with LocalCluster(simulated_time=True, stepped=True, capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("wordcount", CONF, topology)
        coord = cluster.coordinator("wordcount")
        for _ in range(WAVES):
            coord.run_wave()
        emitted = coord.captured["count_bolt"]["default"]
        stats = cluster.get_topology_stats("wordcount")
        errors = cluster.get_errors("wordcount")
    return emitted, stats, errors


def load_quickstart(engine):
    module = load_topology_module(str(TOPOLOGY_FILE))  # finds src/ beside topologies/, as streamparse does
    if engine == "spark":
        ship_by_value(module.squall_src)
    return topology_class(module)


def test_quickstart_equals_native_topology(cluster_kwargs, engine):
    word_count = load_quickstart(engine)
    assert word_count.__name__ == "WordCount"
    got, got_stats, got_errors = run_waves(cluster_kwargs, word_count)
    want, want_stats, _ = run_waves(cluster_kwargs, native_topology())
    assert got_errors == []
    assert got == want
    assert sum(len(rows) for rows in got.values()) == WAVES * PER_WAVE
    final = {w: c for rows in got.values() for w, c in rows}
    assert final == {"dog": 10 * WAVES * PER_WAVE // 4, "cat": WAVES * PER_WAVE // 4,
                     "zebra": WAVES * PER_WAVE // 4, "elephant": WAVES * PER_WAVE // 4}
    for comp in ("word_spout", "count_bolt"):
        for key in ("emitted", "acked", "failed"):
            assert got_stats[comp][key] == want_stats[comp][key], (comp, key)
    assert got_stats["count_bolt"]["executed"] == WAVES * PER_WAVE


def test_squall_run_recognizes_a_streamparse_project(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "squall.cli", "run", str(TOPOLOGY_FILE), "--engine", "local", "--seconds", "1"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=CLEAN_ENV)
    assert out.returncode == 0, out.stderr
    assert "count_bolt" in out.stdout and "word_spout" in out.stdout
    assert "error(s)" not in out.stdout  # the summary lists errors only when there are some


def test_squall_run_takes_path_for_the_source_folder(tmp_path):
    elsewhere = tmp_path / "wordcount.py"
    elsewhere.write_text(TOPOLOGY_FILE.read_text())
    args = [sys.executable, "-m", "squall.cli", "run", str(elsewhere), "--engine", "local", "--seconds", "0.5"]
    missing = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=CLEAN_ENV)
    assert missing.returncode != 0 and "bolts" in missing.stderr  # no src/ beside it: its imports fail
    found = subprocess.run(args + ["--path", str(PROJECT / "src")], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert "count_bolt" in found.stdout
    bad = subprocess.run(args + ["--path", str(tmp_path / "nope")], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env=CLEAN_ENV)
    assert bad.returncode == 2 and "--path" in bad.stderr
