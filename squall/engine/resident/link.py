"""The driver's side of one slot, across the processes that play it (a slot that dies is started
again by its host, and connects back): its connection while it has one, a writer thread for what
the driver sends it, and a reader thread that hands what it sends to the pool."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from squall.engine.resident import wire

log = logging.getLogger("squall")


class Slot:
    """One slot as the driver sees it."""

    def __init__(self, index: int, describe: Callable[[], tuple[str, str]] = lambda: ("Process", "")):
        self.index = index
        self.describe = describe  # the host's name for a slot's process, and where its failures are logged
        self.lock = threading.RLock()
        self.back = threading.Condition(self.lock)  # notified when a process attaches
        self.conn: Any = None
        self.writer: wire.Writer | None = None
        self.incarnation = 0  # processes attached so far
        self.pid: int | None = None
        self.host: str | None = None
        self.address: Any = None  # where it listens for the other slots
        self.deaths = 0
        self.last_death = ""  # which process died last, as an error says it
        self.stopping = False  # told to stop: its end is not a death
        self.broken: str | None = None  # why its host gave it up
        self.sent = wire.Meter()  # what the driver sent it, over every process
        self.received = wire.Meter()  # what it sent the driver

    @property
    def alive(self) -> bool:
        return self.conn is not None

    def send(self, message: tuple) -> bool:
        """Queue `message` for the slot's process; False when it has none (it died)."""
        with self.lock:
            if self.writer is None:
                return False
            self.writer.put(message)
            return True

    def attach(self, conn: Any, hello: dict, on_message: Callable[[Slot, tuple], None],
               on_lost: Callable[[Slot, int], None]) -> None:
        """A process for this slot connected (and said hello)."""
        with self.lock:
            if self.conn is not None:
                self._hang_up()
            self.conn = conn
            self.broken = None
            self.incarnation += 1
            self.writer = wire.Writer(conn, f"squall-slot-{self.index}-write", self.sent)
            self.pid, self.host, self.address = hello.get("pid"), hello.get("host"), hello.get("address")
            threading.Thread(target=self._read, args=(conn, self.incarnation, on_message, on_lost), daemon=True,
                             name=f"squall-slot-{self.index}").start()
            self.back.notify_all()

    def _read(self, conn: Any, incarnation: int, on_message: Callable[[Slot, tuple], None],
              on_lost: Callable[[Slot, int], None]) -> None:
        while True:
            try:
                msg = wire.recv(conn, self.received)
            except (EOFError, OSError):
                break
            except Exception as e:  # noqa: BLE001 - a message the driver cannot read: its topology fails
                log.exception("squall: slot %d sent a message the driver cannot read", self.index)
                msg = ("unreadable", None, self.index, f"{type(e).__name__}: {e}")
            on_message(self, msg)
        with self.lock:
            if incarnation != self.incarnation or self.conn is None:
                return
            self._hang_up()
            if self.stopping:
                return
            self.deaths += 1
            self.last_death = f"slot {self.index}, pid {self.pid} on {self.host}"
        log.warning("squall: slot %d (pid %s on %s) died", self.index, self.pid, self.host)
        on_lost(self, incarnation)

    def wait_attached(self, incarnation: int, timeout: float) -> bool:
        """Wait until a process after `incarnation` is attached (or `timeout` s pass)."""
        with self.lock:
            return self.back.wait_for(lambda: self.incarnation > incarnation and self.conn is not None, timeout)

    def _hang_up(self) -> None:
        """Close the current connection and end its writer (under the lock)."""
        self.writer.close()
        self.conn.close()
        self.conn, self.writer = None, None

    def close(self) -> None:
        with self.lock:
            self.incarnation += 1  # its reader stops without calling it lost
            if self.conn is not None:
                self._hang_up()
