"""A slot: one long-lived process holding tasks of any number of topologies (spout tasks, bolt
tasks, acker partitions), that takes part in their waves with the driver and the other slots
(docs/design.md).

One thread runs everything a topology's tasks do, so a spout's callbacks never run concurrently
and every task takes its waves in order; other threads only read connections into the inbox and
write queued messages out (squall.engine.resident.wire.Writer). What the driver says:
- `load(uid, setup)`: a topology (cloudpickled `Setup`): its spout tasks here are made and opened;
- `book(addresses)`: where every slot listens;
- `marker(uid, epoch, Marker)`: a wave starts;
- `level` / `acks` from the driver itself (driver-bound spouts), as from a slot;
- `active(uid, on)`, `copy(uid, rid, component)` (a copy of a spout task's instance), `drop(uid)`, `stop`.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
import traceback
from collections import deque
from typing import Any

from squall.engine.gc_tuning import freeze_after_first_task, tune_gc
from squall.engine.malloc_tuning import tune_malloc
from squall.engine.resident import wire
from squall.engine.resident.messages import DRIVER
from squall.engine.resident.peers import Peers
from squall.engine.resident.slot_topology import SlotTopology

log = logging.getLogger("squall")

# How long the thread running the tasks may hold the GIL while the threads that read and write the
# slot's connections wait for it (Python's default is 5 ms). Each of their blocking calls gives the
# GIL up, and each message takes several (a header, then a frame per batch), so at the default a
# level message sent while the next level computes reached its peer 5-10 ms late, and the peer
# waited: under a full load each slot sat idle a quarter of the time.
SWITCH_INTERVAL_SECS = 0.0005
# The loop takes in every message that has come before the topologies run their next level (an
# acker's part, say, whose apply is short and which the spouts' next pulls wait for), but runs
# them after this many at the latest, however many more come.
ADVANCE_AFTER = 256


class SlotProcess:
    """This process as slot `index`: its link to the driver, its peers, its topologies."""

    def __init__(self, conn: Any, index: int, incarnation: int, authkey: bytes, family: str, host: str | None):
        self.index = index
        self.incarnation = incarnation
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.local: deque = deque()  # messages this slot sent to itself, handled before the inbox
        self.driver_meter = wire.Meter()  # what this slot sent the driver
        self.driver = wire.Writer(conn, f"squall-slot{index}-to-driver", self.driver_meter)
        self.conn = conn
        self.peers = Peers(index, incarnation, authkey, family, host, self.inbox)
        self.topologies: dict[str, SlotTopology] = {}
        threading.Thread(target=self._read_driver, name=f"squall-slot{index}-driver", daemon=True).start()

    def _read_driver(self) -> None:
        while True:
            try:
                msg = wire.recv(self.conn)
            except (OSError, EOFError):
                break
            except Exception as e:  # noqa: BLE001 - a message this process cannot read
                self.inbox.put(("unreadable", DRIVER, f"{type(e).__name__}: {e}"))
                continue
            self.inbox.put(msg)
        self.inbox.put(("stop",))  # the driver is gone: nothing left to do

    # -- sending ----------------------------------------------------------------------------

    def send(self, dest: int, message: tuple) -> None:
        if dest == self.index:
            self.local.append(message)
        elif dest == DRIVER:
            self.driver.put(message)
        else:
            self.peers.send(dest, message)

    # -- the loop ---------------------------------------------------------------------------

    def serve(self) -> None:
        tune_gc({})
        tune_malloc({})
        taken = 0  # messages taken in since the topologies last advanced
        while True:
            if self.local:
                msg = self.local.popleft()
            else:
                try:
                    msg = self.inbox.get_nowait() if taken < ADVANCE_AFTER else None
                except queue.Empty:
                    msg = None
                if msg is None:
                    taken = 0
                    if self._advance():
                        continue  # it ran something: take in what came meanwhile first
                    msg = self.inbox.get()
            taken += 1
            kind = msg[0]
            if kind == "stop":
                break
            try:
                self._handle(kind, msg)
            except Exception as e:  # noqa: BLE001 - a topology's failure is its own, not the slot's
                uid = msg[1] if len(msg) > 1 and isinstance(msg[1], str) else None
                self._failed(uid, e)
        for topo in list(self.topologies.values()):
            topo.drop()
        self.peers.close()
        self.driver.close(wait=5.0)

    def _advance(self) -> bool:
        """Each topology runs what the messages taken in let it (SlotTopology.advance); whether any did."""
        ran = False
        for uid, topo in list(self.topologies.items()):
            try:
                ran = topo.advance() or ran
            except Exception as e:  # noqa: BLE001 - a topology's failure is its own, not the slot's
                self._failed(uid, e)
        if ran:
            freeze_after_first_task()
        return ran

    def _handle(self, kind: str, msg: tuple) -> None:
        if kind == "book":
            self.peers.set_book(msg[1])
            return
        if kind == "load":
            _, uid, setup, recovering, active = msg
            if uid not in self.topologies:
                self.topologies[uid] = SlotTopology(self, uid, setup, recovering, active)
            self.send(DRIVER, ("loaded", uid, self.index))
            return
        if kind == "peer_gone":
            _, peer, inc = msg
            self.send(DRIVER, ("peer_gone", self.index, peer, inc))
            return
        if kind == "unreadable":
            raise RuntimeError(f"slot {self.index} could not read a message from {msg[1]}: {msg[2]}")
        topo = self.topologies.get(msg[1])
        if topo is None:
            return  # a topology dropped here (or never loaded): what was in flight for it goes
        if kind == "drop":
            del self.topologies[msg[1]]
            topo.drop()
            return
        topo.handle(kind, msg)

    def _failed(self, uid: str | None, e: BaseException) -> None:
        """A topology's message raised here: the driver stops that topology and says why."""
        text = _describe(e)
        log.error("squall slot %d: topology %s failed: %s", self.index, uid, text)
        topo = self.topologies.pop(uid, None) if uid is not None else None
        if topo is not None:
            try:
                topo.drop()
            except Exception:  # noqa: BLE001, S110 - it failed already
                pass
        self.send(DRIVER, ("failed", uid, self.index, text))


def _describe(e: BaseException) -> str:
    """An error as the driver shows it: the exception, where it was raised, and this process's Python."""
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-6:])
    fix = ""
    if isinstance(e, ImportError):  # most often a user's module the executors' Python cannot import
        fix = ("\nThe executors' Python cannot import it: install it there, point PYSPARK_PYTHON (or "
               "spark.pyspark.python) at a Python that has it, or ship it with --py-files / SparkContext.addPyFile")
    return (f"{type(e).__name__}: {e}\n(on slot process pid {os.getpid()}, Python {sys.executable} "
            f"{sys.version.split()[0]}){fix}\n{tb}")


def serve(conn: Any, index: int, authkey: bytes, family: str, host: str | None, hello: dict) -> None:
    """Be slot `index` on `conn` (already admitted by the driver) until the driver says stop or goes
    away. The driver first hears `hello` with this slot's peer address added."""
    slot = SlotProcess(conn, index, os.getpid(), authkey, family, host)
    slot.driver.put({**hello, "address": slot.peers.address})
    t0 = time.perf_counter()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_SECS)
    try:
        slot.serve()
    finally:
        sys.setswitchinterval(switch)
        log.debug("squall slot %d served %.1f s", index, time.perf_counter() - t0)
