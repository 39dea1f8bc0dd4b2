"""CPU caps per simulated host (tests/support/cpu_caps.py), as bench/scaling.py uses them: a capped
group holds its processes to the cap, and a capped NetnsCluster puts every process of a worker host
(the Worker JVM, its executor JVM, PySpark's daemon and the Python workers it forks) in that host's
group, so nothing a host runs escapes its cap or its CPU count.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import zlib

import pytest

from tests.support import cpu_caps
from tests.support.cpu_caps import CpuCap

CI = os.environ.get("CI") == "true"

# Burns `CPU_BUDGET` CPU seconds in two processes (the second forked after the first joined the
# group: it must be capped too), then prints the wall seconds it took.
BURN = """
import os, sys, time
budget = float(sys.argv[1]) / 2
t0 = time.monotonic()
child = os.fork()
while time.process_time() < budget:
    pass
if child == 0:
    os._exit(0)
os.waitpid(child, 0)
print(time.monotonic() - t0, flush=True)
"""
CAP = 0.2
CPU_BUDGET = 0.4  # at 0.2 cores: >= ~1.9 s of wall, however idle the machine


def _skip_or_fail(reason: str) -> None:
    if CI:
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


def _caps_or_skip() -> None:
    reason = cpu_caps.unavailable_reason()
    if reason:
        _skip_or_fail(f"CPU caps cannot be set here: {reason}")


def _group_of(pid: int) -> dict[str, str]:
    """The process's cgroup v1 path per controller ("cpu", "cpuacct", ...); {} if it is gone."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(","):
            out[c] = path
    return out


def _exiting(pid: int) -> bool:
    """Whether a process is gone or on its way out (zombie, dead): an exiting process leaves its
    cgroups before its parent reaps it, so its groups say nothing about where it ran."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X", "x")
    except (OSError, IndexError):
        return True


def _escaped(pid: int, want: str) -> str | None:
    """Why a live process is not in the group `want` in both hierarchies (None: it is, or it is
    exiting). Looked at twice, a moment apart: a process between leaving its cgroups and becoming
    a zombie still shows as running."""
    for attempt in range(2):
        groups = _group_of(pid)
        if _exiting(pid) or (groups.get("cpu") == want and groups.get("cpuacct") == want):
            return None
        if attempt == 0:
            time.sleep(0.1)
    return f"{_cmdline(pid)[:120]} in cpu:{groups.get('cpu')} cpuacct:{groups.get('cpuacct')}"


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_a_capped_group_holds_its_processes_and_their_children_to_the_cap():
    """Two busy processes (one forked inside the group) need CPU_BUDGET CPU seconds; capped at 0.2
    cores they cannot get it faster than budget / cap. Only upper bounds on the rate are asserted:
    a slow or busy machine makes the run longer, never the rate higher."""
    _caps_or_skip()
    cap = CpuCap(f"squall-test-{zlib.crc32(f'{os.getpid()}-{time.time_ns()}'.encode()):08x}", CAP).create()
    proc = None
    try:
        before = cap.usage()
        proc = subprocess.Popen(cap.wrap([sys.executable, "-c", BURN, str(CPU_BUDGET)]), stdout=subprocess.PIPE,
                                text=True, start_new_session=True)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        wall = float(out)
        used = cap.usage().since(before, wall)
        # The group metered both processes: the whole budget (cpuacct, or /proc while they lived).
        if cap.acct_dir is not None:
            assert used["cpu_secs"] >= CPU_BUDGET * 0.95, used
        assert wall >= CPU_BUDGET / CAP / 2, f"{CPU_BUDGET} CPU s in {wall:.2f} s: not capped at {CAP} cores"
        assert used["cores"] < 0.5, used
        assert cap.pids() == []
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # its session: the burner and its forked child
            proc.wait()
        cap.close()
    assert not cap.cpu_dir.exists() and (cap.acct_dir is None or not cap.acct_dir.exists())


@pytest.mark.slow
@pytest.mark.spark
def test_a_capped_cluster_puts_every_process_of_a_worker_host_in_its_group(tmp_path):
    """A 1-worker cluster capped at 0.5 cores runs a plain PySpark job that keeps a Python worker
    busy; while it runs, every process in the host's network namespace is in the host's cpu and
    cpuacct groups, and every kind a host runs was seen. close() removes the groups."""
    from tests.support.netns_cluster import NetnsCluster, unavailable_reason
    from tests.support.netns_runs import run_job
    from tests.support.worker_venv import worker_python

    reason = unavailable_reason()
    if reason:
        _skip_or_fail(f"the multi-host cluster cannot run: {reason}")
    _caps_or_skip()
    cluster = NetnsCluster(tmp_path, workers=1, worker_python=worker_python(), cpu_cap=0.5)
    with cluster:
        w = cluster.workers[0]
        assert w.cap is not None
        want = f"/{w.cap.name}"
        escaped: dict[int, str] = {}
        kinds: set[str] = set()
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                for pid in cluster.ns_pids(w):
                    cmd = _cmdline(pid)
                    if (why := _escaped(pid, want)) is not None:
                        escaped[pid] = why
                    if "deploy.worker.Worker" in cmd:
                        kinds.add("worker_jvm")
                    elif "CoarseGrainedExecutorBackend" in cmd:
                        kinds.add("executor_jvm")
                    elif "pyspark.daemon" in cmd:
                        kinds.add("python")
                python = [p for p in w.cap.pids() if "pyspark.daemon" in _cmdline(p)]
                if len(python) >= 2:
                    kinds.add("python_worker")  # the daemon and a worker forked from it
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            r = run_job(cluster, "hold", "--hold", "6", timeout=300)
        finally:
            done.set()
            watcher.join(10)
        assert r["python_workers"]
        assert escaped == {}, escaped
        assert kinds == {"worker_jvm", "executor_jvm", "python", "python_worker"}, kinds
    assert not w.cap.cpu_dir.exists() and (w.cap.acct_dir is None or not w.cap.acct_dir.exists())
