"""CPU caps for the processes of one simulated host, with cgroup v1's cpu controller, and what they
used, with its cpuacct controller.

A network namespace (tests/support/netns_cluster.py) makes a worker host's network its own, but
every host still shares the machine's cores: a 3-worker cluster on 2 cores cannot show what a
third host adds. Capping each host's group at a fraction of a core (CFS bandwidth control:
`cfs_quota_us` of CPU time per `cfs_period_us`) makes each host small enough that the machine
can hold all of them at once, so throughput against hosts measures the engine, not the machine.

    /sys/fs/cgroup/cpu/squall-<run>-w<i>/      cpu.cfs_quota_us = cores * cpu.cfs_period_us
    /sys/fs/cgroup/cpuacct/squall-<run>-w<i>/  cpuacct.usage: CPU ns used by the group

A process stays in its group across fork and exec, so a host's processes are all in the group
when the first of them joins before it starts anything: `CpuCap.wrap` prefixes a command with a
shell that writes its own pid into both groups and then execs the command.

The cpu and cpuacct controllers are separate hierarchies here; where they are mounted together
(/sys/fs/cgroup/cpu,cpuacct, with cpu and cpuacct as links to it), both paths name the same group
and everything below works the same. Without cpuacct the CPU used is the sum of the group's live
processes' /proc/<pid>/stat (a lower bound: processes that exited are not counted).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CPU_ROOT = Path("/sys/fs/cgroup/cpu")
CPUACCT_ROOT = Path("/sys/fs/cgroup/cpuacct")
PERIOD_US = 100_000
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def unavailable_reason() -> str | None:
    """Why this machine cannot cap groups of processes (None: it can)."""
    if sys.platform != "linux":
        return "cgroups need Linux"
    if os.geteuid() != 0:
        return "cgroups need root (run as root)"
    if not (CPU_ROOT / "cpu.cfs_quota_us").exists():
        return f"no cgroup v1 cpu controller with CFS bandwidth control at {CPU_ROOT} (cpu.cfs_quota_us)"
    probe = CpuCap(f"squall-probe-{os.getpid()}", 0.5)
    try:
        probe.create()
    except OSError as e:
        return f"cannot create a capped cgroup under {CPU_ROOT}: {e}"
    finally:
        probe.close()
    return None


def proc_cpu_secs(pid: int) -> float:
    """CPU seconds (user + system) a live process used so far; 0.0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of stat)


def descendants(pid: int) -> list[int]:
    """Every live process under `pid` (children, their children, ...), from /proc's parent ids."""
    parent: dict[int, int] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    parent[int(p)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = [], [pid]
    while frontier:
        kids = [c for c, pp in parent.items() if pp in frontier]
        found += kids
        frontier = kids
    return found


@dataclass(frozen=True)
class CpuUsage:
    """A group's counters at one moment: CPU seconds used, CFS periods, periods it was throttled
    in, and the time its processes were held back by the cap."""

    cpu_secs: float
    periods: int
    throttled_periods: int
    throttled_secs: float

    def since(self, before: CpuUsage, secs: float) -> dict[str, float]:
        """What the group used between `before` and this reading, `secs` apart: cores (CPU seconds
        per second), CPU seconds, and how much of it the cap held back."""
        used = self.cpu_secs - before.cpu_secs
        periods = self.periods - before.periods
        throttled = self.throttled_periods - before.throttled_periods
        return {"cores": round(used / secs, 3) if secs > 0 else 0.0, "cpu_secs": round(used, 3),
                "throttled_periods": throttled, "periods": periods,
                "throttled_fraction": round(throttled / periods, 3) if periods else 0.0,
                "throttled_secs": round(self.throttled_secs - before.throttled_secs, 3)}


class CpuCap:
    """One group of processes capped at `cores` (a fraction of one core, or several), by name:
    `create()` makes the groups, `wrap`/`add` put processes in, `usage()` reads them, `close()`
    removes them. `CpuCap(name)` of a group another process created reads it just the same."""

    def __init__(self, name: str, cores: float | None = None):
        if cores is not None and cores <= 0:
            raise ValueError(f"a CPU cap must be > 0 cores, not {cores}")
        self.name, self.cores = name, cores
        self.cpu_dir = CPU_ROOT / name
        self.acct_dir = CPUACCT_ROOT / name if (CPUACCT_ROOT / "cpuacct.usage").exists() else None

    @property
    def dirs(self) -> list[Path]:
        """The group's directories, one per hierarchy (one when cpu and cpuacct are mounted together)."""
        if self.acct_dir is None or self.acct_dir.resolve() == self.cpu_dir.resolve():
            return [self.cpu_dir]
        return [self.cpu_dir, self.acct_dir]

    def create(self) -> CpuCap:
        if self.cores is None:
            raise ValueError(f"creating the group {self.name} needs its cap in cores")
        for d in self.dirs:
            d.mkdir(exist_ok=True)
        (self.cpu_dir / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
        (self.cpu_dir / "cpu.cfs_quota_us").write_text(f"{int(self.cores * PERIOD_US)}\n")
        return self

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` started by a shell that first joins the group (every hierarchy), then execs it:
        the command, and everything it forks, runs capped from its first instruction."""
        joins = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(self.dirs)))
        return ["sh", "-c", f'{joins} && shift {len(self.dirs)} && exec "$@"', "squall-cpu-cap",
                *(str(d / "cgroup.procs") for d in self.dirs), *argv]

    def add(self, pid: int) -> None:
        """Moves a running process (not its existing children) into the group."""
        for d in self.dirs:
            (d / "cgroup.procs").write_text(f"{pid}\n")

    def pids(self) -> list[int]:
        """The processes in the group now (from the cpu hierarchy, which caps them)."""
        try:
            return [int(p) for p in (self.cpu_dir / "cgroup.procs").read_text().split()]
        except FileNotFoundError:
            return []

    def usage(self) -> CpuUsage:
        stat = dict(line.split() for line in (self.cpu_dir / "cpu.stat").read_text().splitlines() if line.strip())
        if self.acct_dir is not None:
            cpu = int((self.acct_dir / "cpuacct.usage").read_text()) / 1e9
        else:
            cpu = sum(proc_cpu_secs(p) for p in self.pids())
        return CpuUsage(cpu_secs=cpu, periods=int(stat.get("nr_periods", 0)),
                        throttled_periods=int(stat.get("nr_throttled", 0)),
                        throttled_secs=int(stat.get("throttled_time", 0)) / 1e9)

    def close(self, kill: bool = False) -> None:
        """Removes the groups. Processes still in them are SIGKILLed (`kill`) or moved back to the
        root group first, since a group with processes cannot be removed."""
        for d in self.dirs:
            if not d.exists():
                continue
            root = d.parent / "cgroup.procs"
            deadline = time.monotonic() + 5
            while True:
                for pid in _read_pids(d / "cgroup.procs"):
                    try:
                        if kill:
                            os.kill(pid, signal.SIGKILL)
                        else:
                            root.write_text(f"{pid}\n")
                    except (ProcessLookupError, OSError):
                        pass  # gone meanwhile
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as e:
                    # EBUSY while a killed process is still exiting; give it a moment.
                    if e.errno != errno.EBUSY or time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)


def _read_pids(path: Path) -> list[int]:
    try:
        return [int(p) for p in path.read_text().split()]
    except FileNotFoundError:
        return []
