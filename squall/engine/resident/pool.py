"""The slots of one host (one SparkContext), shared by the topologies running on it.

A topology joins the pool when it starts and leaves when it stops; the host starts the slots for
the first and stops them after the last, so no core stays taken between runs. The pool keeps the
address book (where each slot listens for the others) and gives it to every slot whenever a slot
(re)connects, and hands each message from a slot to the topology it names.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from squall.engine.resident.link import Slot

log = logging.getLogger("squall")

Connected = Callable[[int, Any, dict], None]  # (slot index, connection, hello)


class SlotHost(Protocol):
    """Where slot processes run: starts `count` of them, each connecting back with `connected`,
    starts one again when it dies (`give_up` on a slot it cannot); `halt` stops that (before the
    slots are told to stop), `stop` waits for them to end, ending those that do not. `authkey`
    admits a slot to the driver and to the other slots; `family` is how slots listen."""

    authkey: bytes
    family: str

    def start(self, count: int, connected: Connected, give_up: Callable[[int, str], None]) -> None: ...

    def halt(self) -> None: ...

    def stop(self) -> None: ...

    def describe(self) -> tuple[str, str]:
        """What a slot's process is here ("Python worker"), and a note on where its failures are logged."""
        ...


class Member(Protocol):
    """A topology in the pool: it hears its own messages, and of slots that die or come back."""

    uid: str

    def on_message(self, slot: int, msg: tuple) -> None: ...

    def on_slot_lost(self, slot: int) -> None: ...

    def on_slot_back(self, slot: int) -> None: ...


class SlotPool:
    def __init__(self, host: SlotHost, count: int, max_attempts: int, start_secs: float = 120.0):
        self.host = host
        self.count = count
        self.max_attempts = max_attempts  # how often Spark runs a failed task (a lost wave after that many)
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
                self.slots = [Slot(i, self.host.describe) for i in range(self.count)]
                self.starts += 1
        if first:
            self.host.start(self.count, self._connected, self._give_up)
        slots = self.slots
        deadline = time.monotonic() + self.start_secs
        for slot in slots:
            while not slot.wait_attached(0, min(0.2, max(0.0, deadline - time.monotonic()))):
                if slot.broken is not None:
                    self.leave(member)
                    raise RuntimeError(f"squall: slot {slot.index} could not start: {slot.broken}")
                if time.monotonic() < deadline:
                    continue
                up = sum(s.alive for s in slots)
                self.leave(member)
                raise RuntimeError(
                    f"squall: only {up} of {len(slots)} slots started within {self.start_secs:.0f} s. Each "
                    "slot is a long-running Spark task that holds a core while topologies run: give Spark that many "
                    "free cores, or set squall.spark.slots lower")
        return slots

    def leave(self, member: Member) -> None:
        """Remove a topology (its tasks dropped); the last one out stops the slots."""
        for slot in self.slots:
            slot.send(("drop", member.uid))
        with self.lock:
            self.members.pop(member.uid, None)
            last = not self.members
            slots = self.slots if last else []
        if last:
            self._stop(slots)

    def book(self) -> dict[int, tuple[Any, int | None]]:
        """Where every live slot listens, and its process (so a peer knows a new one)."""
        return {s.index: (s.address, s.pid) for s in self.slots if s.alive and s.address is not None}

    def _stop(self, slots: list[Slot]) -> None:
        self.host.halt()  # no slot started again, no process admitted, once they are told to stop
        for slot in slots:
            slot.stopping = True
            slot.send(("stop",))
        self.host.stop()
        for slot in slots:
            slot.close()

    def _members(self) -> list[Member]:
        with self.lock:
            return list(self.members.values())

    def _connected(self, index: int, conn: Any, hello: dict) -> None:
        if index >= len(self.slots):
            conn.close()
            return
        slot = self.slots[index]
        back = slot.incarnation > 0
        slot.attach(conn, hello, self._message, self._lost)
        book = self.book()
        for s in self.slots:
            s.send(("book", book))
        log.debug("squall: slot %d attached (pid %s on %s, process %d)", index, slot.pid, slot.host, slot.incarnation)
        if back:
            for m in self._members():
                m.on_slot_back(index)

    def _message(self, slot: Slot, msg: tuple) -> None:
        if msg[0] == "peer_gone":
            for m in self._members():
                m.on_message(slot.index, msg)
            return
        uid = msg[1]
        member = self.members.get(uid) if uid is not None else None
        if member is not None:
            member.on_message(slot.index, msg)
        elif msg[0] in ("failed", "unreadable"):  # a slot that could not take a message: every member hears
            for m in self._members():
                m.on_message(slot.index, msg)

    def _lost(self, slot: Slot, incarnation: int) -> None:
        for m in self._members():
            m.on_slot_lost(slot.index)

    def _give_up(self, index: int, reason: str) -> None:
        if index < len(self.slots):
            self.slots[index].broken = reason
            for m in self._members():
                m.on_slot_lost(index)
