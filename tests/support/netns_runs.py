"""Driving tests/support/netns_job.py against a NetnsCluster: a plain run (one JSON result), and the
worker-loss run (kill a worker host after some waves, let a new host join, finish the stream).
Shared by tests/engines/test_netns_cluster.py and bench/cluster.py; failures raise JobError with
the job's stderr tail."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.logs import tail
from tests.support.netns_cluster import NetnsCluster

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "support" / "netns_job.py"
UI_PORT = 4050  # the driver's Spark UI, on the bridge address
JOB_TIMEOUT_SECS = 180


class JobError(RuntimeError):
    pass


def job_command(cluster: NetnsCluster, scenario: str, *opts: str) -> list[str]:
    return [sys.executable, str(JOB), cluster.master_url, cluster.bridge_ip, cluster.worker_python, scenario,
            "--ui-port", str(UI_PORT), "--shared", str(cluster.tmp / "shared"), *opts]


def run_job(cluster: NetnsCluster, scenario: str, *opts: str, env: dict | None = None,
            timeout: float = JOB_TIMEOUT_SECS) -> dict[str, Any]:
    """Runs one job to its end (at most `timeout` seconds, then it is killed); its JSON result."""
    err = cluster.tmp / f"job-{scenario}.stderr"
    with open(err, "wb") as f:
        job = subprocess.Popen(job_command(cluster, scenario, *opts), cwd=str(ROOT), stdout=subprocess.PIPE,
                               stderr=f, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                               start_new_session=True)
        try:
            out, _ = job.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
            raise JobError(f"{scenario} took more than {timeout}s:\n{tail(err)}") from None
    if job.returncode != 0:
        raise JobError(f"{scenario} failed ({job.returncode}):\n{tail(err)}")
    return json.loads(out.decode().strip().splitlines()[-1])


def executors_rest(cluster: NetnsCluster) -> list[dict]:
    base = f"http://{cluster.bridge_ip}:{UI_PORT}/api/v1/applications"
    with urllib.request.urlopen(base, timeout=5) as r:
        app = json.load(r)[0]["id"]
    with urllib.request.urlopen(f"{base}/{app}/executors", timeout=5) as r:
        return json.load(r)


def _wait_busy(cluster: NetnsCluster, ip: str, deadline: float) -> int:
    """Polls the driver until the executor on `ip` is running a task (its count), or 0 at the deadline."""
    while time.monotonic() < deadline:
        try:
            active = sum(e.get("activeTasks", 0) for e in executors_rest(cluster)
                         if e.get("hostPort", "").startswith(ip + ":"))
        except (OSError, ValueError, IndexError, KeyError):
            active = 0
        if active:
            return active
        time.sleep(0.005)
    return 0


def longest_stall(t_kill: float, completed: list[float]) -> float:
    """The longest the stream stood still from the kill on: the largest gap between the kill and
    the waves completed after it, one after another. Not just kill to the next completion: a wave
    in flight that never needed the lost host can complete a millisecond after the kill, and the
    loss holds the stream up later, once the driver finds a shuffle output gone."""
    times = [t_kill, *sorted(t for t in completed if t > t_kill)]
    if len(times) < 2:
        raise JobError("no wave completed after the kill")
    return max(b - a for a, b in zip(times, times[1:]))


class _Lines:
    """The job's stdout, one JSON object per line, read on a thread."""

    def __init__(self, job: subprocess.Popen, err: Path):
        self.job, self.err = job, err
        self.q: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.job.stdout:
            self.q.put(line)
        self.q.put(None)

    def next(self, deadline: float) -> dict:
        while True:
            try:
                line = self.q.get(timeout=1)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise JobError(f"the loss job stalled:\n{tail(self.err)}") from None
                continue
            if line is None:
                self.job.wait()
                raise JobError(f"the loss job ended ({self.job.returncode}):\n{tail(self.err)}")
            return json.loads(line)


def worker_loss(cluster: NetnsCluster, *opts: str, kill_after_waves: int = 4, message_timeout: int = 30,
                wave_tuples: int = 1000) -> dict[str, Any]:
    """Runs the unbounded word count on every worker's core, SIGKILLs the first live worker host
    once `kill_after_waves` waves completed (work done, not time) and the driver shows a task
    running on it (so a task dies with it), starts a new host, waits until
    its executor has run tasks, then ends the stream. The job's result plus what happened.
    `opts`: more job options (--data, --dsn, --table: a Trident word count alongside)."""
    victim = next(w for w in cluster.workers if w.proc is not None and w.proc.poll() is None)
    err = cluster.tmp / "job-loss.stderr"
    cmd = job_command(cluster, "wordcount-loss", "--wave-tuples", str(wave_tuples), "--tail", "300", "--parallelism",
                      str(len(cluster.workers)), "--message-timeout", str(message_timeout), *opts)
    with open(err, "wb") as f:
        job = subprocess.Popen(cmd, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=f, stdin=subprocess.PIPE,
                               start_new_session=True)
    lines = _Lines(job, err)
    deadline = time.monotonic() + JOB_TIMEOUT_SECS
    try:
        wave = lines.next(deadline)
        while wave["wave"] < kill_after_waves:
            wave = lines.next(deadline)
        busy = _wait_busy(cluster, victim.ip, deadline=time.monotonic() + 10)  # mid-task, when it can be seen
        killed_at_wave, t_kill, trident_running = wave["wave"], time.time(), wave.get("trident_running")
        killed = cluster.kill_worker(victim)
        joined = cluster.add_worker()  # a host joining later: a new namespace, a new worker
        after, new_tasks = [], 0
        while new_tasks == 0:
            after.append(lines.next(deadline))
            try:
                # a slot is a task that runs for the whole job: Spark counts it in totalTasks only when it ends
                new_tasks = sum(e.get("totalTasks", 0) + e.get("activeTasks", 0) for e in executors_rest(cluster)
                                if e.get("hostPort", "").startswith(joined.ip + ":"))
            except (OSError, ValueError, IndexError, KeyError):
                pass  # the driver's UI is busy: ask again after the next wave
        job.stdin.write(b"release\n")
        job.stdin.flush()
        while "wave" in (line := lines.next(deadline)):
            after.append(line)
        job.wait(30)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    if job.returncode != 0:
        raise JobError(f"the loss job failed ({job.returncode}):\n{tail(err)}")
    stall = longest_stall(t_kill, [x["t"] for x in after])
    return {**line, "killed_at_wave": killed_at_wave, "killed_pids": killed, "victim_ip": victim.ip,
            "joined_ip": joined.ip, "new_worker_tasks": new_tasks,
            "trident_running_at_kill": trident_running, "victim_tasks_at_kill": busy, "stall_secs": round(stall, 3)}
