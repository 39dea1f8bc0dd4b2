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
    """(parent pid, CPU seconds, command line) of a process, None if it is gone. The command line
    is read again only when the process's name changed (_seen; a forked child that exec'd): the
    word count bench reads the tree at every wave end, and reading every process's two files each
    time took ~2.8 ms, charged to the driver."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
        comm, rest = text[text.index("(") + 1:].rsplit(")", 1)
        fields = rest.split()
        ppid = int(fields[1])
        seen = _seen.get(pid)
        if seen is None or seen[1] != comm:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                seen = _seen[pid] = (ppid, comm, f.read().decode(errors="replace"))
        elif seen[0] != ppid:  # reparented (its parent died): the tree walk must not keep it under the old one
            seen = _seen[pid] = (ppid, comm, seen[2])
    except (OSError, ValueError):
        return None
    return seen[0], (int(fields[11]) + int(fields[12])) / _TICK, seen[2]


_seen: dict[str, tuple[int, str, str]] = {}  # pid -> (parent pid, name, command line)


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
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    for gone in _seen.keys() - set(pids):
        del _seen[gone]
    for p in pids:  # a new process: its parent and command line
        if p not in _seen:
            _stat(p)
    parent = {int(p): ppid for p, (ppid, _comm, _cmd) in _seen.items()}
    tree, grew = {root}, True
    while grew:
        kids = {pid for pid, ppid in parent.items() if ppid in tree} - tree
        tree |= kids
        grew = bool(kids)
    procs = {pid: s for pid in tree if (s := _stat(str(pid))) is not None}  # only the tree's CPU is read again
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
