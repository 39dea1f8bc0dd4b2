"""A TCP proxy in front of a broker that can cut every open connection, as a network failure
would: the connection-drop tests put it between a spout and its broker."""

from __future__ import annotations

import socket
import threading
import time


class TcpProxy:
    """Forwards <bind>:<port> (127.0.0.1 unless told) to a broker; `drop()` cuts every open
    connection (as a network failure would); new connections are accepted as before.
    `drop(dark_secs=...)` first swallows what clients send for that long, as a network that goes
    dark before it breaks: whatever a client writes then is lost for sure. The
    multi-host cluster tests bind it to their bridge address, so workers in other network
    namespaces reach a service that listens on the root namespace's loopback."""

    def __init__(self, host: str, port: int, bind: str = "127.0.0.1"):
        self.target = (host, port)
        self.server = socket.create_server((bind, 0))
        self.port = self.server.getsockname()[1]
        self.lock = threading.Lock()
        self.socks: list[socket.socket] = []
        self.closed = False
        self.drops = 0
        self.dark = False  # what clients send is read and thrown away
        self.peers: list[str] = []  # the address of every client accepted, in order
        threading.Thread(target=self._accept, daemon=True, name="tcp-proxy").start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, peer = self.server.accept()
                self.peers.append(peer[0])
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.socks += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if not (from_client and self.dark):
                    dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def drop(self, dark_secs: float = 0.0) -> int:
        """Cut every open connection (after `dark_secs` of swallowing what clients send); the
        number of connections cut."""
        if dark_secs > 0:
            self.dark = True
            time.sleep(dark_secs)
        self.dark = False
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.drops += 1
        return len(socks) // 2

    def close(self) -> None:
        self.closed = True
        self.server.close()
        self.drop()
