"""A slot's connections to the other slots: it listens on an address of its own (a Unix socket
when every executor shares the driver's host, else TCP on the address it reaches the driver
from), sends to each other slot over one connection of its own, made on first use from the
driver's address book, and reads every connection made to it into its inbox.

A connection is admitted by `multiprocessing.connection`'s HMAC challenge with the key the
driver gave every slot, so only slots of this driver talk to each other; TCP connections carry
TCP_NODELAY. Each outgoing connection is written by a thread of its own (squall.engine.resident.wire).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import tempfile
import threading
from multiprocessing.connection import Client, Listener
from typing import Any

from squall.engine.resident import wire

log = logging.getLogger("squall")


class Peers:
    """Slot `index`'s links to the other slots. What comes in is put on `inbox` as is; a peer
    that goes away is put there as ("peer_gone", index, incarnation)."""

    def __init__(self, index: int, incarnation: int, authkey: bytes, family: str, host: str | None,
                 inbox: queue.SimpleQueue):
        self.index = index
        self.incarnation = incarnation
        self.authkey = authkey
        self.inbox = inbox
        self.meter = wire.Meter()  # what this slot sent to its peers
        self._path: str | None = None
        if family == "AF_UNIX":  # `host`: the driver's socket directory, which the driver removes at its end
            self._path = os.path.join(host or tempfile.gettempdir(), f"slot{index}-{os.getpid()}")
            self.listener = Listener(self._path, family="AF_UNIX", authkey=authkey)
        else:
            self.listener = Listener((host or "0.0.0.0", 0), family="AF_INET", authkey=authkey)  # noqa: S104
        self.family = family
        self.book: dict[int, tuple[Any, int]] = {}  # slot -> (address, incarnation)
        self._out: dict[int, tuple[Any, wire.Writer, int]] = {}  # slot -> (connection, writer, incarnation)
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name=f"squall-slot{index}-accept", daemon=True).start()

    @property
    def address(self) -> Any:
        return self.listener.address

    def set_book(self, book: dict[int, tuple[Any, int]]) -> None:
        """The driver's address book: a peer whose process changed gets a new connection."""
        with self._lock:
            self.book = dict(book)
            for peer, (conn, writer, inc) in list(self._out.items()):
                if peer not in self.book or self.book[peer][1] != inc:
                    writer.close()
                    conn.close()
                    del self._out[peer]

    def send(self, peer: int, message: Any) -> None:
        """Queue `message` for slot `peer` (connecting to it first if need be)."""
        writer = self._writer(peer)
        if writer is not None:
            writer.put(message)

    def _writer(self, peer: int) -> wire.Writer | None:
        with self._lock:
            got = self._out.get(peer)
            if got is not None:
                return got[1]
            entry = self.book.get(peer)
            if entry is None or self._closed:
                self.inbox.put(("peer_gone", peer, None))
                return None
            address, inc = entry
            try:
                conn = Client(address, family=self.family, authkey=self.authkey)
                wire.no_delay(conn)
                wire.send(conn, {"slot": self.index, "incarnation": self.incarnation})
            except (OSError, EOFError, ValueError) as e:
                log.warning("squall slot %d: cannot reach slot %d at %s: %s", self.index, peer, address, e)
                self.inbox.put(("peer_gone", peer, inc))
                return None
            writer = wire.Writer(conn, f"squall-slot{self.index}-to-{peer}", self.meter,
                                 on_error=lambda e, p=peer, i=inc: self.inbox.put(("peer_gone", p, i)))
            self._out[peer] = (conn, writer, inc)
            return writer

    def _accept(self) -> None:
        while True:
            try:
                conn = self.listener.accept()
            except OSError:  # closed
                return
            except Exception as e:  # noqa: BLE001 - a stranger that failed the handshake
                log.warning("squall slot %d: refused a connection (%s)", self.index, e)
                continue
            threading.Thread(target=self._read, args=(conn,), name=f"squall-slot{self.index}-from",
                             daemon=True).start()

    def _read(self, conn: Any) -> None:
        try:
            hello = wire.recv(conn)
            wire.no_delay(conn)
        except (OSError, EOFError):
            conn.close()
            return
        peer, inc = hello.get("slot"), hello.get("incarnation")
        inbox = self.inbox
        while True:
            try:
                msg = wire.recv(conn)
            except (OSError, EOFError):
                break
            except Exception as e:  # noqa: BLE001 - a message this process cannot read: its topology fails
                inbox.put(("unreadable", peer, f"{type(e).__name__}: {e}"))
                continue
            inbox.put(msg)
        conn.close()
        if not self._closed:
            inbox.put(("peer_gone", peer, inc))

    def close(self) -> None:
        self._closed = True
        with self._lock:
            for conn, writer, _ in self._out.values():
                writer.close(wait=2.0)
                conn.close()
            self._out.clear()
        try:
            self.listener.close()
        except OSError:
            pass
        if self._path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._path)
