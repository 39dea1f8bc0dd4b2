"""The Spark engine on a real Spark standalone cluster (a master and a worker started from the
installed pyspark), not only on embedded `local[...]`: the bounded word count gives the same final
count per word as the local engine and as the spout's own sentence generator.

The cluster run happens in a subprocess (tests/support/spark_cluster_job.py): a process holds one
SparkContext, and this one already has the `local` session of tests/conftest.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.logs import tail
from tests.support.spark_cluster_job import expected_counts, load_example, run_wordcount

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "support" / "spark_cluster_job.py"
LIMIT = 3000  # sentences: about 26,000 words
WAVE_TUPLES = 600  # so the cluster run takes several waves and carries WordCount's counts across them
START_DEADLINE_SECS = 90
JOB_TIMEOUT_SECS = 150


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def spark_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": spark_home(),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_CONF_DIR": str(tmp / "conf"),  # empty: nothing from the machine's own configuration
        "SPARK_WORKER_DIR": str(tmp / "work"),  # not under site-packages
        "SPARK_LOCAL_DIRS": str(tmp / "local"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    })
    for d in ("conf", "work", "local"):
        (tmp / d).mkdir(exist_ok=True)
    return env


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as f:  # the child keeps its own descriptor
        return subprocess.Popen(args, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=str(log.parent))


def kill_group(proc: subprocess.Popen | None) -> None:
    """SIGTERM the process group (the JVM and what it started: executors, Python workers), then SIGKILL."""
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
            # The group may outlive its leader (an executor still shutting down): make sure.
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            break
        except subprocess.TimeoutExpired:
            continue
        break


def master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return json.load(r)


@pytest.fixture
def standalone(tmp_path):
    """A Spark standalone master and one worker (2 cores, 2 GB) on 127.0.0.1; both process groups
    are killed at the end whatever happens."""
    env = spark_env(tmp_path)
    spark_class = os.path.join(env["SPARK_HOME"], "bin", "spark-class")
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    master_log, worker_log = tmp_path / "master.log", tmp_path / "worker.log"
    master = worker = None
    try:
        master = spawn([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(port), "--webui-port", str(ui_port)], env, master_log)
        worker = spawn([spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                        "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui),
                        "--work-dir", env["SPARK_WORKER_DIR"]], env, worker_log)
        deadline = time.monotonic() + START_DEADLINE_SECS
        while True:
            for name, proc, log in (("master", master, master_log), ("worker", worker, worker_log)):
                if proc.poll() is not None:
                    pytest.fail(f"the Spark {name} exited with {proc.returncode}:\n{tail(log)}")
            try:
                state = master_state(ui_port)
                if state.get("aliveworkers", 0) >= 1 and state.get("cores", 0) >= 2:
                    break
            except (OSError, ValueError):
                # Its web UI is not up yet, or not yet the leader's: the UI is bound before the master
                # is elected (STANDBY, then ALIVE) and in between /json/ answered an HTML page once.
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"no worker registered with {url} within {START_DEADLINE_SECS}s\n"
                            f"--- master log ---\n{tail(master_log)}\n--- worker log ---\n{tail(worker_log)}")
            time.sleep(0.5)
        yield url, ui_port, env
    finally:
        kill_group(worker)
        kill_group(master)


def test_wordcount_on_standalone_cluster_matches_local_engine(standalone, tmp_path):
    url, ui_port, env = standalone
    job_log = tmp_path / "job.stderr"
    job = None
    try:
        with open(job_log, "wb") as err:
            job = subprocess.Popen(
                [sys.executable, str(JOB), url, "--limit", str(LIMIT), "--wave-tuples", str(WAVE_TUPLES),
                 "--timeout", str(JOB_TIMEOUT_SECS - 30)],
                env=env, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                start_new_session=True)
            try:
                out, _ = job.communicate(timeout=JOB_TIMEOUT_SECS)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the cluster job took more than {JOB_TIMEOUT_SECS}s:\n{tail(job_log)}")
        assert job.returncode == 0, f"the cluster job failed ({job.returncode}):\n{tail(job_log)}"
    finally:
        kill_group(job)  # its driver JVM, if anything is left of it
    lines = out.decode().strip().splitlines()
    assert lines, f"the cluster job printed nothing:\n{tail(job_log)}"
    on_cluster = json.loads(lines[-1])
    print("cluster run:", {k: v for k, v in on_cluster.items() if k != "counts"})  # shown on failure, or with -s

    module = load_example()
    expected = expected_counts(module, LIMIT)
    local = run_wordcount(module, LIMIT, wave_tuples=WAVE_TUPLES, engine="local")
    words = sum(expected.values())

    # It really ran on the standalone cluster: its master, an executor besides the driver, an
    # application the master knows about.
    assert on_cluster["master"] == url
    assert len(on_cluster["executor_hosts"]) >= 2, on_cluster["executor_hosts"]
    state = master_state(ui_port)
    apps = {a["id"] for a in state.get("activeapps", []) + state.get("completedapps", [])}
    assert on_cluster["app_id"] in apps, (on_cluster["app_id"], apps)

    # Every sentence acked once, nothing failed or lost, no errors; several waves.
    for run in (on_cluster, local):
        assert run["errors"] == []
        assert run["lost_waves"] == 0
        assert run["spout_emitted"] == run["spout_acked"] == LIMIT
        assert run["spout_failed"] == 0 and run["pending"] == 0
    assert on_cluster["waves"] >= LIMIT // WAVE_TUPLES

    # The same final count per word everywhere, each word counted exactly once.
    assert local["counts"] == expected
    assert on_cluster["counts"] == expected
    assert on_cluster["split_emits"] == on_cluster["count_emits"] == words
    assert local["split_emits"] == local["count_emits"] == words
