"""A multi-host Spark standalone cluster on one machine: a master in the root network namespace
and one worker per network namespace, on a private subnet this harness creates and removes.

    root ns:  bridge sqb<run> 10.213.N.1/24  <- Spark master, the driver, TCP forwarders
    ns i:     veth 10.213.N.(11+i)/24 + lo   <- one Spark worker, its executors and Python workers

A namespace isolates only the network: the filesystem is shared, so "a worker without squall" is
made real by the worker's Python (tests/support/worker_venv.py), not by the disk.

Every name carries a per-run suffix and the subnet is one no interface uses yet, so two runs cannot
collide. Every process is started by pid with its own process group; `kill_worker` SIGKILLs the
worker's group and every process left in its namespace (PySpark's daemon makes a group of its own).
`close()` stops everything and deletes the namespaces and links, whatever happened before.

`cpu_cap`: each worker host gets at most this many cores (a cgroup v1 group per host,
tests/support/cpu_caps.py). The worker starts through a shell that joins its group and then execs
`ip netns exec ...`; the Worker JVM, the executor JVMs it forks and PySpark's daemon and Python
workers inherit the group, so every process of the host is capped and metered from its start.
Without a cap nothing changes: no cgroup is touched.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path

from tests.support.cpu_caps import CpuCap

PREFIX = "10.213"
MASTER_PORT = 7077
MASTER_UI_PORT = 8080
WORKER_UI_PORT = 8081
START_DEADLINE_SECS = 90


def unavailable_reason() -> str | None:
    """Why this machine cannot host the harness (None: it can)."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (run the tests as root)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is missing (apt-get install iproute2)"
    probe = f"sqprobe{os.getpid() % 100000}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"`ip netns add` failed: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {r.stderr.strip()}")
    return r


def _free_subnet(seed: int) -> int:
    """A third octet N with no 10.213.N.x address on this host (another run's, or anyone's)."""
    used = _ip("-o", "-4", "addr", "show").stdout
    for k in range(250):
        n = (seed + k) % 250 + 1
        if f" {PREFIX}.{n}." not in used:
            return n
    raise RuntimeError(f"no free {PREFIX}.N.0/24 subnet on this host")


def _tail(path: Path, n: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as f:  # the child keeps its own descriptor
        return subprocess.Popen(args, env=env, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=str(log.parent))


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class Worker:
    index: int
    ns: str
    ip: str
    veth: str
    proc: subprocess.Popen | None = None
    pgid: int | None = None
    log: Path | None = None
    cap: CpuCap | None = None  # the host's CPU group, when the cluster caps its hosts


class NetnsCluster:
    """A Spark master (root ns, on the bridge address) and `workers` workers, one per namespace;
    with `cpu_cap`, each worker host's processes share at most that many cores."""

    def __init__(self, tmp: Path, workers: int = 3, cores: int = 1, memory: str = "1g",
                 worker_python: str | None = None, cpu_cap: float | None = None):
        self.tmp = Path(tmp)
        self.ncores, self.memory, self.cpu_cap = cores, memory, cpu_cap
        self.worker_python = worker_python or sys.executable
        self.run = f"{zlib.crc32(f'{os.getpid()}-{time.time_ns()}'.encode()) % 0xFFFFF:05x}"
        self.subnet = _free_subnet(zlib.crc32(self.run.encode()))
        self.bridge = f"sqb{self.run}"
        self.bridge_ip = f"{PREFIX}.{self.subnet}.1"
        self.master_url = f"spark://{self.bridge_ip}:{MASTER_PORT}"
        self.master_ui = f"http://{self.bridge_ip}:{MASTER_UI_PORT}"
        self.workers: list[Worker] = []
        self.master: subprocess.Popen | None = None
        self._nworkers = workers
        self._bridge_up = False

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> NetnsCluster:
        if threading.current_thread() is threading.main_thread():
            # A SIGTERM'd test run still tears down (finally blocks run on SystemExit).
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self._bridge_up = True
            _ip("addr", "add", f"{self.bridge_ip}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            self.master = _spawn(
                [self._spark_class(), "org.apache.spark.deploy.master.Master", "--host", self.bridge_ip,
                 "--port", str(MASTER_PORT), "--webui-port", str(MASTER_UI_PORT)],
                self.env(self.bridge_ip, "master"), self.tmp / "master.log")
            for _ in range(self._nworkers):
                self.add_worker(wait=False)
            self.wait_workers(self._nworkers)
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> NetnsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def env(self, ip: str, name: str) -> dict[str, str]:
        """Spark's environment for a process on `ip`: nothing from the machine's own configuration."""
        d = self.tmp / name
        for sub in ("conf", "work", "local"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        env.pop("PYTHONPATH", None)  # a worker must not see the driver's checkout
        env.update({
            "SPARK_HOME": spark_home(),
            "SPARK_LOCAL_IP": ip,
            "SPARK_CONF_DIR": str(d / "conf"),
            "SPARK_WORKER_DIR": str(d / "work"),
            "SPARK_LOCAL_DIRS": str(d / "local"),
            "PYSPARK_PYTHON": self.worker_python,
        })
        return env

    def _spark_class(self) -> str:
        return os.path.join(spark_home(), "bin", "spark-class")

    def add_worker(self, wait: bool = True) -> Worker:
        """A new namespace with its veth on the bridge, and a worker in it (a host joining)."""
        i = len(self.workers)
        w = Worker(i, ns=f"sq{self.run}-{i}", ip=f"{PREFIX}.{self.subnet}.{11 + i}", veth=f"sqv{self.run}{i}")
        self.workers.append(w)
        if self.cpu_cap is not None:
            w.cap = CpuCap(f"squall-{self.run}-w{i}", self.cpu_cap).create()
        peer = f"sqp{self.run}{i}"
        _ip("netns", "add", w.ns)
        _ip("link", "add", w.veth, "type", "veth", "peer", "name", peer)
        _ip("link", "set", w.veth, "master", self.bridge)
        _ip("link", "set", w.veth, "up")
        _ip("link", "set", peer, "netns", w.ns)
        for args in (("addr", "add", f"{w.ip}/24", "dev", peer), ("link", "set", peer, "up"),
                     ("link", "set", "lo", "up"), ("route", "add", "default", "via", self.bridge_ip)):
            _ip("-n", w.ns, *args)
        self.start_worker(w)
        if wait:
            self.wait_workers(sum(1 for x in self.workers if x.proc is not None and x.proc.poll() is None))
        return w

    def start_worker(self, w: Worker) -> None:
        w.log = self.tmp / f"worker{w.index}.log"
        env = self.env(w.ip, f"worker{w.index}")
        args = ["ip", "netns", "exec", w.ns, self._spark_class(), "org.apache.spark.deploy.worker.Worker",
                self.master_url, "--host", w.ip, "--cores", str(self.ncores), "--memory", self.memory,
                "--webui-port", str(WORKER_UI_PORT), "--work-dir", env["SPARK_WORKER_DIR"]]
        w.proc = _spawn(w.cap.wrap(args) if w.cap is not None else args, env, w.log)
        w.pgid = w.proc.pid  # start_new_session: the group's id is the leader's pid (the wrapper execs)

    def master_json(self) -> dict:
        """The master's /json/ state; under load it once answered HTML, so parse defensively."""
        with urllib.request.urlopen(f"{self.master_ui}/json/", timeout=5) as r:
            body = r.read()
        try:
            state = json.loads(body)
        except ValueError as e:
            raise OSError(f"the master's /json/ answered non-JSON: {body[:80]!r}") from e
        if not isinstance(state, dict):
            raise OSError(f"the master's /json/ answered {type(state).__name__}, not an object")
        return state

    def alive_worker_hosts(self) -> set[str]:
        return {w.get("host") for w in self.master_json().get("workers", []) if w.get("state") == "ALIVE"}

    def wait_workers(self, n: int, deadline_secs: float = START_DEADLINE_SECS) -> None:
        deadline = time.monotonic() + deadline_secs
        while True:
            if self.master is not None and self.master.poll() is not None:
                raise RuntimeError(f"the Spark master exited ({self.master.returncode}):\n"
                                   f"{_tail(self.tmp / 'master.log')}")
            try:
                if len(self.alive_worker_hosts()) >= n:
                    return
            except OSError:
                pass  # not up yet, or an HTML answer: retry
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- worker {w.index} ---\n{_tail(w.log)}" for w in self.workers if w.log)
                raise RuntimeError(f"{n} workers did not register with {self.master_url} in {deadline_secs}s\n"
                                   f"--- master ---\n{_tail(self.tmp / 'master.log')}\n{logs}")
            time.sleep(0.5)

    # -- faults ---------------------------------------------------------------------------

    def ns_pids(self, w: Worker) -> list[int]:
        r = _ip("netns", "pids", w.ns, check=False)
        return [int(p) for p in r.stdout.split()]

    def kill_worker(self, w: Worker) -> list[int]:
        """SIGKILL the worker JVM's process group (its executor JVMs with it) and every process
        left in its namespace (PySpark's daemon and Python workers, which make their own group)
        or in its CPU group."""
        if w.pgid is not None:
            _killpg(w.pgid, signal.SIGKILL)
        pids = self.ns_pids(w)
        if w.cap is not None:
            pids += [p for p in w.cap.pids() if p not in pids]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if w.proc is not None:
            try:
                w.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        return pids

    # -- teardown -------------------------------------------------------------------------

    def close(self) -> None:
        for w in self.workers:
            if w.pgid is not None:
                _killpg(w.pgid, signal.SIGTERM)
        if self.master is not None:
            _killpg(self.master.pid, signal.SIGTERM)
        time.sleep(0.5)
        for w in self.workers:
            self.kill_worker(w)
        if self.master is not None:
            _killpg(self.master.pid, signal.SIGKILL)
            try:
                self.master.wait(10)
            except subprocess.TimeoutExpired:
                pass
        for w in self.workers:
            _ip("link", "del", w.veth, check=False)
            _ip("netns", "del", w.ns, check=False)
            if w.cap is not None:
                try:
                    w.cap.close(kill=True)  # only this host's processes can be left in it
                except OSError as e:
                    print(f"netns_cluster: could not remove the CPU group {w.cap.name}: {e}", file=sys.stderr)
        if self._bridge_up:
            _ip("link", "del", self.bridge, check=False)
            self._bridge_up = False


if __name__ == "__main__":  # a cluster to try things on by hand: runs until Enter
    import tempfile

    from tests.support.worker_venv import worker_python

    with NetnsCluster(Path(tempfile.mkdtemp(prefix="squall-netns-")), worker_python=worker_python()) as c:
        print(c.master_url, c.bridge_ip, c.worker_python, c.tmp, flush=True)
        sys.stdin.readline()
