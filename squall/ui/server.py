"""Serves the UI from the process that runs the topologies: uvicorn in a daemon thread, on a
socket bound before the thread starts (so the port, even a free one picked with 0, is known)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

log = logging.getLogger("squall")

DEFAULT_HOST = "127.0.0.1"
START_TIMEOUT_SECS = 10.0


def _missing_ui() -> ImportError:
    return ImportError("the squall UI needs starlette, uvicorn and prometheus-client: "
                       "pip install 'squall[ui]' (./dev setup installs them)")


class UIServer:
    """The web page, REST API and /metrics of `cluster`, on http://host:port/."""

    def __init__(self, cluster: Any, port: int = 8080, host: str = DEFAULT_HOST):
        try:
            import uvicorn  # noqa: PLC0415 - optional dependency (the ui extra)

            from squall.ui.app import create_app  # noqa: PLC0415
        except ImportError as e:
            raise _missing_ui() from e
        self.host = host
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
        except OSError as e:
            self.sock.close()
            raise OSError(f"squall UI: cannot listen on {host}:{port} ({e.strerror}); pick another port "
                          "(--ui PORT, LocalCluster(ui_port=...)) or 0 for any free one") from e
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(create_app(cluster), log_level="warning", access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       name="squall-ui", daemon=True)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> UIServer:
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECS
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"squall UI did not start on {self.url}")
            time.sleep(0.01)
        log.info("squall UI on %s", self.url)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout=START_TIMEOUT_SECS)
        self.sock.close()
