"""The slots of one host (one SparkContext), shared by the topologies running on it.

A topology joins the pool when it starts and leaves when it stops; the host starts the slots for
the first and stops them after the last, so no core stays taken between runs. Every topology has
tasks on every slot. When a slot's process connects (the first time, or again after it died),
each topology in the pool gets to load itself there and rebuild its tasks first (its `resync`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from squall.engine.resident.link import Resync, Slot

log = logging.getLogger("squall")

Connected = Callable[[int, Any, dict], None]  # (slot index, connection, hello)


class SlotHost(Protocol):
    """Where slot processes run: starts `count` of them, each connecting back with `connected`,
    starts one again when it dies (`give_up` on a slot it cannot); `halt` stops that (before the
    slots are told to stop), `stop` waits for them to end, ending those that do not."""

    def start(self, count: int, connected: Connected, give_up: Callable[[int, str], None]) -> None: ...

    def halt(self) -> None: ...

    def stop(self) -> None: ...

    def describe(self) -> tuple[str, str]:
        """What a slot's process is here ("Python worker"), and a note on where its failures are logged."""
        ...


class Member(Protocol):
    uid: str

    def resync(self, slot: Slot) -> list[tuple]: ...


class SlotPool:
    def __init__(self, host: SlotHost, count: int, max_attempts: int, start_secs: float = 120.0):
        self.host = host
        self.count = count
        self.max_attempts = max_attempts
        self.start_secs = start_secs
        self.lock = threading.Lock()
        self.members: dict[str, Member] = {}
        self.slots: list[Slot] = []
        self.starts = 0  # times the host started the slots (a topology after none)

    def join(self, member: Member) -> list[Slot]:
        """Add a topology; start the slots if it is the first, and wait until all are there."""
        with self.lock:
            first = not self.members
            self.members[member.uid] = member
            if first:
                self.slots = [Slot(i, self.max_attempts, self.host.describe) for i in range(self.count)]
                self.starts += 1
        if first:
            self.host.start(self.count, self._connected, self._give_up)
        slots = self.slots
        for slot in slots:  # loaded where a process is attached; a later one resyncs it
            with slot.lock:
                if slot.alive:
                    for message in member.resync(slot):
                        slot.request(*message)
        deadline = time.monotonic() + self.start_secs
        for slot in slots:
            if not slot.wait_attached(0, max(0.0, deadline - time.monotonic())):
                up = sum(s.alive for s in slots)
                self.leave(member)
                raise RuntimeError(
                    f"squall: only {up} of {len(slots)} resident slots started within {self.start_secs:.0f} s. Each "
                    "slot is a long-running Spark task that holds a core while topologies run: give Spark that many "
                    "free cores, or set squall.spark.slots lower (or squall.spark.tasks: per-wave)")
        return slots

    def leave(self, member: Member) -> None:
        """Remove a topology (its tasks dropped); the last one out stops the slots."""
        for slot in self.slots:
            if slot.alive:
                slot.request("drop", member.uid)
        with self.lock:
            self.members.pop(member.uid, None)
            last = not self.members
            slots = self.slots if last else []
        if last:
            self._stop(slots)

    def _stop(self, slots: list[Slot]) -> None:
        self.host.halt()  # no slot started again, no process admitted, once they are told to stop
        for slot in slots:
            slot.stopping = True
        stops = [slot.request("stop") for slot in slots if slot.alive]
        for f in stops:
            try:
                f.result(timeout=30)
            except Exception:  # noqa: BLE001, S110 - a slot that is gone stops anyway
                pass
        self.host.stop()
        for slot in slots:
            slot.close()

    def _resyncs(self) -> list[Resync]:
        with self.lock:
            return [m.resync for m in self.members.values()]

    def _connected(self, index: int, conn: Any, hello: dict) -> None:
        if index >= len(self.slots):
            conn.close()
            return
        slot = self.slots[index]
        with slot.lock:  # members read under the slot's lock: one joining now loads itself after
            slot.attach(conn, hello, self._resyncs())
        log.debug("squall: slot %d attached (pid %s on %s, process %d)", index, slot.pid, slot.host,
                  slot.incarnation)

    def _give_up(self, index: int, reason: str) -> None:
        if index < len(self.slots):
            self.slots[index].give_up(reason)
