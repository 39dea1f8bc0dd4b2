"""Slots hosted by Spark: each slot is a Spark job of one task that runs until told to stop, in
one of the executors' Python workers (squall.engine.resident.slot). Spark places it, and when its
process dies Spark runs the task again (up to the master's task attempts; after that the job
fails and is submitted again here), and the new process connects back to the driver.

The driver listens on a Unix socket when every executor is on its host (`local[...]`,
`local-cluster[...]`), else on TCP at `spark.driver.host`; slots listen for each other the same
way (TCP on the address they reach the driver from). A connection is admitted by the HMAC
challenge of `multiprocessing.connection` with a key only this driver's closures carry.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Client, Listener
from typing import Any

from squall.api.config import Config
from squall.engine.resident import wire
from squall.engine.resident.driver import ClusterDriver
from squall.engine.resident.pool import Connected, SlotPool
from squall.engine.spark.host_local import is_local_master
from squall.engine.spark.logs import spark_log_note
from squall.engine.spark.session import temp_checkpoint_dir, topology_session, ui_url
from squall.engine.spark.ship import pickle_user_modules_by_value, ship_squall
from squall.version import __version__

log = logging.getLogger("squall")

JOB_RESTARTS = 5  # a slot's job that failed this many times in a row with no process connecting: given up
_POOLS: dict[int, SlotPool] = {}
_POOLS_LOCK = threading.Lock()


def slot_task(address: Any, family: str, authkey: bytes, version: str) -> Callable[[Iterable[int]], Iterator[bytes]]:
    """What a slot's Spark task runs: check this Python has what a slot needs (squall of the
    driver's `version`, numpy, pyarrow), connect to the driver, say which slot it is and where it
    listens for the other slots, then serve."""

    def run(it: Iterable[int]) -> Iterator[bytes]:
        import sys  # noqa: PLC0415

        import numpy  # noqa: F401, PLC0415 - squall's own dependencies: missing, the slot cannot start
        import pyarrow  # noqa: F401, PLC0415
        from pyspark import TaskContext  # noqa: PLC0415

        from squall import version as here  # noqa: PLC0415 - this Python's squall, not the facade
        from squall.engine.resident.slot import serve  # noqa: PLC0415

        if here.__version__ != version:
            raise ImportError(f"this executor's Python ({sys.executable}) imports squall {here.__version__} "
                              f"from {os.path.dirname(here.__file__)}, the driver runs squall {version}")

        (index,) = list(it)
        conn = Client(address, family=family, authkey=authkey)
        wire.no_delay(conn)
        tc = TaskContext.get()
        hello = {"slot": index, "pid": os.getpid(), "host": socket.gethostname(),
                 "attempt": tc.attemptNumber() if tc is not None else 0}
        # where this slot listens for its peers: the address it reaches the driver from, or the
        # driver's socket directory (removed with the pool, whatever way the slot ends)
        where = _local_address(conn) if family == "AF_INET" else os.path.dirname(address)
        try:
            serve(conn, index, authkey, family, where, hello)
        finally:
            conn.close()
        return iter(())

    return run


def job_failure(e: BaseException) -> str:
    """The first real cause of a failed Spark job: the Python exception its task raised (Py4J's
    own first line only names the call that failed)."""
    text = str(e)
    causes = re.findall(r"^\s*((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): .*)$", text, re.MULTILINE)
    python = [c.strip() for c in causes if not c.strip().startswith(("py4j.", "org.", "java.", "scala."))]
    if python:
        return python[-1][:500]
    return text.strip().splitlines()[0][:300] if text.strip() else type(e).__name__


def _local_address(conn: Any) -> str:
    """The address this process reaches the driver from: the other slots reach it there too."""
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        return sock.getsockname()[0]
    finally:
        sock.close()


def task_attempts(sc: Any) -> int:
    """How many times Spark runs a failed task: `local[N,F]` F times, `local[N]` once, a
    cluster `spark.task.maxFailures` (4)."""
    master = sc.master
    m = re.fullmatch(r"local\[[^,\]]+,\s*(\d+)\]", master)
    if m:
        return int(m.group(1))
    if master.startswith("local") and not master.startswith("local-cluster"):
        return 1
    return int(sc.getConf().get("spark.task.maxFailures", "4"))


class SparkSlots:
    """A SlotHost on a SparkContext (squall.engine.resident.pool)."""

    def __init__(self, sc: Any):
        self.sc = sc
        self.id = secrets.token_hex(4)
        self._dir: str | None = None
        self._listener: Listener | None = None
        self._running = False
        self._jobs: list[threading.Thread] = []
        self._hellos: dict[int, int] = {}
        self.authkey = secrets.token_bytes(32)
        self.family = "AF_UNIX" if is_local_master(sc.master) else "AF_INET"

    def _listen(self) -> Listener:
        self._key = self.authkey
        if is_local_master(self.sc.master):
            self._dir = tempfile.mkdtemp(prefix="squall-slots-")
            self._family = "AF_UNIX"
            return Listener(os.path.join(self._dir, "driver"), family="AF_UNIX", authkey=self._key)
        host = self.sc.getConf().get("spark.driver.host", None) or socket.gethostname()
        self._family = "AF_INET"
        return Listener((host, 0), family="AF_INET", authkey=self._key)

    def start(self, count: int, connected: Connected, give_up: Callable[[int, str], None]) -> None:
        self._listener = self._listen()
        self._running = True
        self._hellos = dict.fromkeys(range(count), 0)
        threading.Thread(target=self._accept, args=(self._listener, connected), daemon=True,
                         name="squall-slots-accept").start()
        fn = slot_task(self._listener.address, self._family, self._key, __version__)
        self._jobs = [threading.Thread(target=self._keep, args=(i, fn, give_up), daemon=True,
                                       name=f"squall-slot-job-{i}") for i in range(count)]
        for t in self._jobs:
            t.start()

    def _accept(self, listener: Listener, connected: Connected) -> None:
        while True:
            try:
                conn = listener.accept()
                if self._listener is not listener:  # woken by halt
                    conn.close()
                    return
                hello = wire.recv(conn)
            except OSError:  # closed: the slots are stopped
                return
            except Exception as e:  # noqa: BLE001 - a stranger, or a slot that died saying hello
                log.warning("squall: refused a slot connection (%s)", e)
                continue
            wire.no_delay(conn)
            self._hellos[hello["slot"]] = self._hellos.get(hello["slot"], 0) + 1
            connected(hello["slot"], conn, hello)

    def _group(self, index: int) -> str:
        return f"squall-slots-{self.id}-{index}"

    def _keep(self, index: int, fn: Any, give_up: Callable[[int, str], None]) -> None:
        """Slot `index`'s Spark job, submitted again whenever it ends while the slots run."""
        failures = 0
        while self._running:
            if self.sc._jsc is None:  # the context was stopped under the slots
                return
            hellos = self._hellos.get(index, 0)
            self.sc.setJobGroup(self._group(index), f"squall resident slot {index}", interruptOnCancel=True)
            try:
                self.sc.parallelize([index], 1).mapPartitions(fn).collect()
                failures = 0
            except Exception as e:  # noqa: BLE001 - Py4J wraps the job's failure
                if not self._running:
                    return
                failures = 0 if self._hellos.get(index, 0) > hellos else failures + 1
                reason = job_failure(e)
                cannot_import = re.match(r"(ModuleNotFound|Import)Error", reason) and not self._hellos.get(index)
                if failures >= JOB_RESTARTS or cannot_import:  # an executor's Python that lacks a module: at once
                    log.error("squall: slot %d could not start (%s): given up", index, reason)
                    give_up(index, f"its Spark task failed: {reason}{self._fix() if cannot_import else ''}")
                    return
                log.warning("squall: the Spark job of slot %d failed (%s); submitting it again", index, reason)
                time.sleep(min(5.0, 0.2 * (1 << failures)))

    def _fix(self) -> str:
        conf = self.sc.getConf()
        python = conf.get("spark.pyspark.python", None) or os.environ.get("PYSPARK_PYTHON") or \
            "python3 (PySpark's default: neither spark.pyspark.python nor PYSPARK_PYTHON is set)"
        return (f". The executors' Python is {python}; it must import squall {__version__}, numpy and "
                f"pyarrow. Point PYSPARK_PYTHON (or spark.pyspark.python) at a Python that has them, such as the "
                f"driver's ({sys.executable}), or ship squall with --py-files / SparkContext.addPyFile "
                "(squall.engine.spark.ship.squall_zip() makes its zip)")

    @staticmethod
    def describe() -> tuple[str, str]:
        return "Python worker", spark_log_note()

    def halt(self) -> None:
        self._running = False
        if self._listener is not None:
            listener, self._listener = self._listener, None
            try:  # closing a listening socket does not wake the thread blocked accepting on it: a connection does
                Client(listener.address, family=self._family, authkey=self._key).close()
            except OSError:
                pass
            listener.close()

    def stop(self) -> None:
        self.halt()
        deadline = time.monotonic() + 30
        for i, t in enumerate(self._jobs):
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                self.sc.cancelJobGroup(self._group(i))
                t.join(10)
        self._jobs = []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def pool_for(sc: Any, conf: dict) -> SlotPool:
    """The slot pool of this SparkContext, made on first use."""
    count = max(1, int(conf.get(Config.SQUALL_SPARK_SLOTS) or sc.defaultParallelism))
    with _POOLS_LOCK:
        pool = _POOLS.get(id(sc))
        if pool is None or pool.host.sc is not sc:
            pool = _POOLS[id(sc)] = SlotPool(SparkSlots(sc), count, task_attempts(sc))
        with pool.lock:
            if not pool.members:  # no slot runs: the next topology decides how many
                pool.count = count
        return pool


def slots_leaving_a_core(sc: Any, conf: dict, who: str) -> dict:
    """`conf` with squall.spark.slots set so that one core stays free for Spark's own jobs (a
    streaming query's micro-batches), which would wait forever behind slots holding every core."""
    cores = sc.defaultParallelism
    want = conf.get(Config.SQUALL_SPARK_SLOTS)
    if cores < 2:
        raise ValueError(f"{who} needs at least 2 Spark cores: one for the query's own tasks and one for the "
                         f"topology's slot; this SparkContext has {cores} (master {sc.master}). Use local[2] or more")
    if want is not None and int(want) >= cores:
        raise ValueError(f"{who}: squall.spark.slots={want} would hold all {cores} Spark cores, and the query's "
                         f"own tasks could never run; set it to at most {cores - 1}")
    with _POOLS_LOCK:
        pool = _POOLS.get(id(sc))
    if pool is not None and pool.host.sc is sc and pool.members and pool.count >= cores:
        raise ValueError(f"{who}: other topologies on this SparkContext hold all {cores} Spark cores in slots; "
                         f"kill them first, or submit them with squall.spark.slots at most {cores - 1}")
    return {**conf, Config.SQUALL_SPARK_SLOTS: int(want) if want is not None else cores - 1}


def checkpoint_dir(sc: Any, conf: dict) -> str:
    """Where the slots keep their snapshots: squall.checkpoint.dir, else the context's checkpoint
    dir, else a temp dir (one host)."""
    return conf.get(Config.SQUALL_CHECKPOINT_DIR) or sc.getCheckpointDir() or temp_checkpoint_dir()


def cluster_driver(name: str, topology: Any, conf: dict, clock: Any, spark: Any = None,
                   capture: bool = False) -> ClusterDriver:
    """The Spark engine's driver of a topology: the session (`topology_session`), the context's
    slot pool, and a checkpoint directory for the slots' snapshots."""
    sc = topology_session(spark, conf, topology).sparkContext
    ship_squall(sc)
    pickle_user_modules_by_value(sc, [spec.obj for spec in topology.specs.values()])
    conf = {**conf, Config.SQUALL_CHECKPOINT_DIR: checkpoint_dir(sc, conf)}
    return ClusterDriver(name, topology, conf, clock, pool_for(sc, conf), capture, "spark", ui_url(sc))
