"""The driver's side of one slot, across the processes that play it (a slot that dies is started
again by its host, and reconnects).

Requests go out in order and a slot answers them in that order, so the oldest request waiting is
the one an answer is for, and the one the slot was running when it died. When it dies, its
requests wait; once it is back, the topologies it held rebuild their tasks there first
(`attach`'s resyncs), then the waiting requests are sent again, in order, as Spark runs a failed
task again: the one it was running counts an attempt, and after `max_attempts` it fails
(`SlotLost`), which loses its wave.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from squall.engine.resident import wire

log = logging.getLogger("squall")

Resync = Callable[["Slot"], list[tuple]]  # a topology's messages for a slot that is back


class SlotLost(RuntimeError):
    """A request's slot died every time it ran it (or was given up on)."""


class SlotError(RuntimeError):
    """A slot answered a request with an error (a bolt that cannot be pickled, say)."""


@dataclass
class Request:
    rid: int
    message: tuple
    future: Future
    on_answer: Callable[[Any], None] | None = None
    group: tuple[str, int] | None = None  # (topology, wave) of a step: see `request`
    attempts: int = 0


class Slot:
    """One slot as the driver sees it: its connection while it has one, and the requests it owes."""

    def __init__(self, index: int, max_attempts: int,
                 describe: Callable[[], tuple[str, str]] = lambda: ("Process", "")):
        self.index = index
        self.max_attempts = max(1, max_attempts)
        self.describe = describe  # the host's name for a slot's process, and a note on where its failures are logged
        self.lock = threading.RLock()
        self.back = threading.Condition(self.lock)  # notified when a process attaches
        self.conn: Any = None
        self._out: queue.SimpleQueue | None = None  # what the current process's writer thread sends, in order
        self.incarnation = 0  # processes attached so far
        self.pid: int | None = None
        self.host: str | None = None
        self.deaths = 0
        self.stopping = False  # told to stop: its end is not a death
        self.broken: str | None = None  # why its host gave it up: requests fail at once
        self.waiting: deque[Request] = deque()
        self._ids = itertools.count(1)

    @property
    def alive(self) -> bool:
        return self.conn is not None

    def request(self, *message: Any, on_answer: Callable[[Any], None] | None = None,
                group: tuple[str, int] | None = None) -> Future:
        """Send `message` (kind, args...) once the slot has a process; its answer's payload is the
        future's result. `on_answer` sees an ok payload first, under the slot's lock: what it
        records cannot be missed by a resync. A step's `group` is (topology, wave): one that fails
        for good takes along the steps of its topology's later waves queued behind it, which must
        not run after it."""
        with self.lock:
            req = Request(next(self._ids), message, Future(), on_answer, group)
            if self.broken is not None:
                req.future.set_exception(SlotLost(f"slot {self.index}: {self.broken}"))
                return req.future
            self.waiting.append(req)
            if self.conn is not None:
                self._send(req)
        return req.future

    def _send(self, req: Request) -> None:
        """Queue a request for the writer thread (under the lock): a send that blocks on a full socket
        must not hold the lock the reader needs, or the two processes wait on each other's reads."""
        self._out.put(req)

    @staticmethod
    def _write(conn: Any, out: queue.SimpleQueue) -> None:
        while (req := out.get()) is not None:
            try:
                wire.send(conn, (req.message[0], req.rid, *req.message[1:]))
            except OSError:  # the process died: its reader sees it and the request waits for the next
                return

    def attach(self, conn: Any, hello: dict, resyncs: list[Resync]) -> None:
        """A process for this slot connected: the topologies' resyncs go first, then what waits."""
        with self.lock:
            if self.conn is not None:
                self._hang_up()
            self.conn = conn
            self._out = queue.SimpleQueue()
            self.broken = None
            self.incarnation += 1
            threading.Thread(target=self._write, args=(conn, self._out), daemon=True,
                             name=f"squall-slot-{self.index}-write").start()
            self.pid, self.host = hello.get("pid"), hello.get("host")
            first = [Request(next(self._ids), m, Future()) for r in resyncs for m in r(self)]
            for req in first:
                req.future.add_done_callback(_log_failure(self.index, req.message[0]))
            self.waiting.extendleft(reversed(first))
            for req in self.waiting:
                self._send(req)
            threading.Thread(target=self._read, args=(conn, self.incarnation), daemon=True,
                             name=f"squall-slot-{self.index}").start()
            self.back.notify_all()

    def _read(self, conn: Any, incarnation: int) -> None:
        while True:
            try:
                reply = wire.recv(conn)
            except (EOFError, OSError):
                break
            except Exception as e:  # noqa: BLE001 - an answer the driver cannot unpickle: that request fails
                log.exception("squall: slot %d sent an answer the driver cannot read", self.index)
                reply = ("error", None, f"its answer could not be read here: {type(e).__name__}: {e}", "")
            with self.lock:
                if incarnation != self.incarnation or not self.waiting:
                    return
                req = self.waiting.popleft()
                if reply[0] == "ok" and req.on_answer is not None:
                    try:
                        req.on_answer(reply[2])
                    except Exception as e:  # noqa: BLE001 - a bug here must fail the request, not the reader
                        log.exception("squall: recording slot %d's answer failed", self.index)
                        reply = ("error", req.rid, f"{type(e).__name__}: {e}", "")
            if reply[0] == "ok":
                req.future.set_result(reply[2])
            else:
                req.future.set_exception(SlotError(f"slot {self.index}: {reply[2]}\n{reply[3]}"))
        self._lost(incarnation)

    def _lost(self, incarnation: int) -> None:
        failed = None
        behind: list[Request] = []
        with self.lock:
            if incarnation != self.incarnation or self.conn is None:
                return
            self._hang_up()
            if self.stopping:
                return
            self.deaths += 1
            if self.waiting:
                head = self.waiting[0]
                head.attempts += 1
                if head.attempts >= self.max_attempts:
                    failed = self.waiting.popleft()
                    if failed.group is not None:
                        behind = [r for r in self.waiting if _later(r.group, failed.group)]
                        self.waiting = deque(r for r in self.waiting if not _later(r.group, failed.group))
        log.warning("squall: slot %d (pid %s on %s) died%s", self.index, self.pid, self.host,
                    f"; its request {failed.message[0]!r} failed {failed.attempts} time(s), given up" if failed
                    else "; its requests wait for it to come back")
        if failed is not None:
            process, note = self.describe()
            failed.future.set_exception(SlotLost(  # Spark's own words for it, so both can be looked up
                f"{process} exited unexpectedly (slot {self.index}, pid {self.pid} on {self.host}) running this "
                f"request, {failed.attempts} time(s){note}"))
        for req in behind:
            req.future.set_exception(SlotLost(f"dropped: a request before it in slot {self.index} failed"))

    def give_up(self, reason: str) -> None:
        """The host cannot start this slot again: every request it owes fails."""
        with self.lock:
            self.broken = reason
            owed, self.waiting = list(self.waiting), deque()
        for req in owed:
            if not req.future.done():
                req.future.set_exception(SlotLost(f"slot {self.index}: {reason}"))

    def wait_attached(self, incarnation: int, timeout: float) -> bool:
        """Wait until a process after `incarnation` is attached (or `timeout` s pass)."""
        with self.lock:
            return self.back.wait_for(lambda: self.incarnation > incarnation and self.conn is not None, timeout)

    def _hang_up(self) -> None:
        """Close the current connection and end its writer (under the lock)."""
        self._out.put(None)
        self.conn.close()
        self.conn, self._out = None, None

    def close(self) -> None:
        with self.lock:
            self.incarnation += 1  # its reader stops without calling it lost
            if self.conn is not None:
                self._hang_up()


def _later(group: tuple[str, int] | None, than: tuple[str, int]) -> bool:
    """A step of the same topology as `than`, of a later wave."""
    return group is not None and group[0] == than[0] and group[1] > than[1]


def _log_failure(index: int, kind: str) -> Callable[[Future], None]:
    def done(f: Future) -> None:
        if f.exception() is not None:
            log.error("squall: slot %d could not %s after it came back: %s", index, kind, f.exception())
    return done
