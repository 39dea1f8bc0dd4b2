"""Messages between the driver and a slot, over a `multiprocessing.connection.Connection`.

A message is a small pickled header and the byte strings it carries (pickled batches, a task's
snapshot), sent as frames of their own after it: the header pickles them out of band
(`pickle.PickleBuffer`, protocol 5), so the driver passes a level's output on to the next level
as the very bytes it received, with no copy into a pickle and none out of it. Anything else
(numpy arrays, a TaskResult) travels inside the header.
"""

from __future__ import annotations

import os
import pickle
import queue
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_COUNT = struct.Struct("<I")
SETUP_KINDS = frozenset({"load", "rollback"})  # messages that carry a whole topology


def blob(data: bytes) -> pickle.PickleBuffer:
    """Wrap bytes so `send` carries them as a frame of their own."""
    return pickle.PickleBuffer(data)


@dataclass
class Meter:
    """What crossed one connection: messages, header bytes, and the bytes of the frames carried
    out of band (pickled batches: tuple payload)."""

    messages: int = 0
    header_bytes: int = 0
    frame_bytes: int = 0
    setup_bytes: int = 0  # of them, what shipped a topology (SETUP_KINDS): once a slot, not per wave

    @property
    def bytes(self) -> int:
        return self.header_bytes + self.frame_bytes

    @property
    def wave_bytes(self) -> int:
        """What the waves themselves cost on this connection (the topology shipped left out)."""
        return self.bytes - self.setup_bytes

    def add(self, other: Meter) -> None:
        self.messages += other.messages
        self.header_bytes += other.header_bytes
        self.frame_bytes += other.frame_bytes
        self.setup_bytes += other.setup_bytes


def send(conn: Any, message: Any, meter: Meter | None = None) -> None:
    """One message: its header, then each wrapped byte string as a frame."""
    frames: list[memoryview] = []

    def out_of_band(buf: pickle.PickleBuffer) -> bool:
        view = buf.raw()
        if isinstance(view.obj, bytes):
            frames.append(view)
            return False
        return True  # a numpy array's buffer, say: inside the header

    header = pickle.dumps(message, protocol=5, buffer_callback=out_of_band)
    conn.send_bytes(_COUNT.pack(len(frames)) + header)
    for frame in frames:
        conn.send_bytes(frame)
    if meter is not None:
        meter.messages += 1
        meter.header_bytes += len(header) + _COUNT.size
        meter.frame_bytes += sum(f.nbytes for f in frames)
        if type(message) is tuple and message and message[0] in SETUP_KINDS:
            meter.setup_bytes += len(header) + _COUNT.size + sum(f.nbytes for f in frames)


def recv(conn: Any, meter: Meter | None = None) -> Any:
    """One message, its byte strings as `bytes` (raises EOFError when the peer is gone)."""
    first = conn.recv_bytes()
    (count,) = _COUNT.unpack_from(first)
    frames = [conn.recv_bytes() for _ in range(count)]
    if meter is not None:
        meter.messages += 1
        meter.header_bytes += len(first)
        meter.frame_bytes += sum(len(f) for f in frames)
    return pickle.loads(memoryview(first)[_COUNT.size:], buffers=frames)


class Writer:
    """Sends messages on one connection, in order, from a thread of its own: a send blocked on a
    full socket then never holds up its sender's loop (two processes each blocked sending to the
    other, neither reading, would wait for ever). `on_error` hears of a send that failed (the peer
    is gone); later messages are dropped."""

    def __init__(self, conn: Any, name: str, meter: Meter | None = None,
                 on_error: Callable[[BaseException], None] | None = None):
        self.conn = conn
        self.meter = meter
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._on_error = on_error
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, message: Any) -> None:
        self._q.put(message)

    def close(self, wait: float = 0.0) -> None:
        """No more messages; with `wait`, give the thread that long to send what is queued."""
        self._q.put(None)
        if wait:
            self._thread.join(wait)

    def _run(self) -> None:
        while (message := self._q.get()) is not None:
            try:
                send(self.conn, message, self.meter)
            except (OSError, EOFError, ValueError) as e:
                if self._on_error is not None:
                    self._on_error(e)
                return


def no_delay(conn: Any) -> None:
    """TCP_NODELAY on a TCP connection: a frame over 16 KB goes as its length, then its bytes, and
    Nagle's algorithm would hold the bytes until the peer's delayed ACK of the length (~40 ms)."""
    fd = os.dup(conn.fileno())
    sock = socket.socket(fileno=fd)
    try:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    finally:
        sock.close()
