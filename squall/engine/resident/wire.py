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
import socket
import struct
from typing import Any

_COUNT = struct.Struct("<I")


def blob(data: bytes) -> pickle.PickleBuffer:
    """Wrap bytes so `send` carries them as a frame of their own."""
    return pickle.PickleBuffer(data)


def send(conn: Any, message: Any) -> None:
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


def recv(conn: Any) -> Any:
    """One message, its byte strings as `bytes` (raises EOFError when the peer is gone)."""
    first = conn.recv_bytes()
    (count,) = _COUNT.unpack_from(first)
    frames = [conn.recv_bytes() for _ in range(count)]
    return pickle.loads(memoryview(first)[_COUNT.size:], buffers=frames)


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
