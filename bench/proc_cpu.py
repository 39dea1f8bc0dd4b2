"""Where a benchmark's cores go, without a profiler: CPU seconds of this process and its
descendants by kind (this driver, Spark's JVM, PySpark's Python workers), read from /proc.

On a 2-core machine the kinds compete for the same cores, so a rate alone does not say whether
the Python workers, the JVM (shuffle, serialization) or the driver bound it; the cores each
kind used over a measured window do. Linux only: elsewhere the figures are empty.
"""

from __future__ import annotations

import os

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: str) -> tuple[int, float, str] | None:
    """(parent pid, CPU seconds, command line) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().decode(errors="replace")
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, cmd


def _kind(pid: int, root: int, cmd: str) -> str:
    if pid == root:
        return "driver"
    if "java" in cmd:
        return "jvm"
    if "pyspark" in cmd:
        return "python_workers"
    return "other"


def tree_cpu(root: int | None = None) -> dict[str, float]:
    """CPU seconds so far (user + system) of `root` (default: this process) and every process
    under it, summed by kind: driver, jvm, python_workers, other."""
    root = os.getpid() if root is None else root
    if not os.path.isdir("/proc"):
        return {}
    procs = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(p)) is not None}
    tree, grew = {root}, True
    while grew:
        kids = {pid for pid, (ppid, _cpu, _cmd) in procs.items() if ppid in tree} - tree
        tree |= kids
        grew = bool(kids)
    out = {"driver": 0.0, "jvm": 0.0, "python_workers": 0.0, "other": 0.0}
    for pid in tree & procs.keys():
        _ppid, cpu, cmd = procs[pid]
        out[_kind(pid, root, cmd)] += cpu
    return out


def cores(first: dict[str, float] | None, last: dict[str, float] | None, secs: float) -> dict[str, float] | None:
    """Cores each kind used between two `tree_cpu` readings `secs` apart (processes that ended
    between them are not counted)."""
    if not first or not last or secs <= 0:
        return None
    return {k: round(max(last[k] - first.get(k, 0.0), 0.0) / secs, 2) for k in last}
