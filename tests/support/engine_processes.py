"""The Python worker processes of one SparkContext, found by walking parent pids down from its
JVM. A test that kills workers must kill only those its own session started: other test runs
on the same machine have their own JVMs and workers, and a name pattern would hit them too."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat a process tree walk needs."""

    pid: int
    comm: str
    state: str
    ppid: int


def read_stat(pid: int) -> ProcStat | None:
    """None when the process is gone (it may exit while /proc is being read)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ')'.
    open_paren, close_paren = text.index("("), text.rindex(")")
    state, ppid = text[close_paren + 2:].split()[:2]
    return ProcStat(pid, text[open_paren + 1:close_paren], state, int(ppid))


def all_processes() -> list[ProcStat]:
    stats = (read_stat(int(entry)) for entry in os.listdir("/proc") if entry.isdigit())
    return [s for s in stats if s is not None]


def descendants(root: int, procs: list[ProcStat]) -> list[ProcStat]:
    """Every process below `root` in the parent tree (children, grandchildren, ...)."""
    children: dict[int, list[ProcStat]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    out: list[ProcStat] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child.pid)
    return out


def jvm_pid(spark: Any) -> int:
    """The pid of the JVM behind this SparkSession, as the JVM itself reports it (over py4j)."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def python_workers(spark: Any) -> list[ProcStat]:
    """Live Python processes under this session's JVM: its pyspark daemon and the workers it forked."""
    found = descendants(jvm_pid(spark), all_processes())
    return [p for p in found if p.comm.startswith("python") and p.state != "Z"]


def kill_python_workers(spark: Any) -> list[ProcStat]:
    """SIGKILL this session's Python workers; returns those that were alive to be killed, once
    PySpark runs Python tasks again (`drain_dead_workers`)."""
    killed = []
    for proc in python_workers(spark):
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # exited between the walk and the kill
            continue
        killed.append(proc)
    drain_dead_workers(spark)
    return killed


def drain_dead_workers(spark: Any, jobs: int = 50) -> int:
    """Run one-task Python jobs until one succeeds; returns how many failed. Spark keeps idle
    Python workers for reuse, and after their daemon is killed each dead one still queued costs
    the task that takes it an attempt ("Stream closed" when Spark tells the dead daemon to stop
    it, or "Python worker exited unexpectedly" while the zombie looks alive). A task of the wave
    after a kill ran out of its 4 attempts on them and the wave was lost, which is what a Spark
    job failure does, not what these tests are about. Here up to 3 of these jobs (12 attempts)
    failed before one ran. Each failed attempt takes one dead worker off the queue, and the
    queue is empty once a task succeeds (Spark restarts the daemon only when none is queued)."""
    sc = spark.sparkContext
    for failed in range(jobs):
        try:
            sc.parallelize([0], 1).map(lambda x: x + 1).collect()
            return failed
        except Py4JJavaError:
            continue
    raise AssertionError(f"PySpark ran no Python task in {jobs} jobs after its workers were killed")
