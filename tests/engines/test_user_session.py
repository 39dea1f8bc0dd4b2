"""A Spark user's own session and modules (real PySpark, `local[2]`, each in a process of its own
started from another directory, as a user runs a script): the topology's components come from the
user's module next to the script and just work; an executor Python that cannot run a slot stops
the submit at once, saying which Python and what to set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SENTENCES = 2000

MYBOLTS = '''
from squall import BasicBolt, Bolt, Spout
from helpers import words_of


class Sentences(Spout):
    def __init__(self, n):
        self.n = n

    def declare_output_fields(self, d):
        d.declare(["sentence"])

    def open(self, conf, context, collector):
        self.collector, self.i, self.acked, self.failed = collector, 0, 0, 0

    def next_tuple(self):
        if self.i < self.n:
            self.collector.emit([f"the cat {self.i % 7} sat"], msg_id=self.i)
            self.i += 1

    def ack(self, msg_id):
        self.acked += 1

    def fail(self, msg_id):
        self.failed += 1


class Split(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, d):
        d.declare(["word"])

    def execute(self, t):
        for w in words_of(t[0]):
            self.collector.emit([w], anchors=[t])
        self.collector.ack(t)


class Count(BasicBolt):
    def prepare(self, conf, context):
        self.counts = {}

    def declare_output_fields(self, d):
        d.declare(["word", "count"])

    def execute(self, t, collector):
        self.counts[t[0]] = self.counts.get(t[0], 0) + 1
        collector.emit([t[0], self.counts[t[0]]])
'''

APP = '''
import json, sys, time
from pyspark.sql import SparkSession
from squall import LocalCluster, TopologyBuilder
from mybolts import Count, Sentences, Split

spark = SparkSession.builder.master("local[2]").appName("user-session").getOrCreate()
b = TopologyBuilder()
b.set_spout("sentences", Sentences({n}))
b.set_bolt("split", Split(), parallelism=2).shuffle_grouping("sentences")
b.set_bolt("count", Count(), parallelism=2).fields_grouping("split", ["word"])
t0 = time.monotonic()
out = {{}}
try:
    with LocalCluster(engine="spark", spark=spark) as cluster:
        cluster.submit_topology("mine", {{}}, b.create_topology())
        cluster.wait_idle(120)
        st = cluster.get_topology_stats("mine")["sentences"]
        out = {{"acked": st["acked"], "failed": st["failed"], "errors": cluster.coordinator("mine").error_count}}
except Exception as e:
    out = {{"error": f"{{type(e).__name__}}: {{e}}"}}
out["secs"] = time.monotonic() - t0
print("RESULT " + json.dumps(out), flush=True)
spark.stop()
'''


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "mybolts.py").write_text(MYBOLTS)
    (proj / "helpers.py").write_text("def words_of(s):\n    return s.split()\n")
    (proj / "app.py").write_text(textwrap.dedent(APP.format(n=SENTENCES)))
    return proj


def _run(proj: Path, cwd: Path, env: dict) -> dict:
    """Run the user's script by its path from `cwd`, with nothing of this checkout on its path."""
    env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON")}
    p = subprocess.run([sys.executable, str(proj / "app.py")], cwd=str(cwd), env=env, capture_output=True,
                       text=True, timeout=300)
    lines = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert lines, f"no result (exit {p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def test_users_own_session_and_module_from_another_directory_acks_everything(tmp_path):
    proj = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = _run(proj, elsewhere, {**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert r.get("error") is None, r
    assert r["acked"] == SENTENCES and r["failed"] == 0 and r["errors"] == 0, r


def test_an_executor_python_that_cannot_run_a_slot_stops_the_submit_saying_why(tmp_path):
    """The executors' Python is a bare venv (no squall, numpy or pyarrow): the submit fails within
    seconds, naming that Python and PYSPARK_PYTHON; nothing was acked or failed."""
    proj = _project(tmp_path)
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    t0 = time.monotonic()
    r = _run(proj, tmp_path, {**os.environ, "PYSPARK_PYTHON": str(bare / "bin" / "python")})
    err = r.get("error") or ""
    assert "could not start" in err, r
    assert str(bare / "bin" / "python") in err and "PYSPARK_PYTHON" in err, err
    assert "No module named" in err, err
    assert "acked" not in r
    print(f"refused after {r['secs']:.1f} s of submit ({time.monotonic() - t0:.1f} s with the session)")
