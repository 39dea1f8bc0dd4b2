"""EventLoopThread: an asyncio event loop in a daemon thread, the bridge from a connector's
synchronous spout methods to an asyncio client library (nats-py)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any


class EventLoopThread:
    """An asyncio event loop running in a daemon thread; `call` waits for a coroutine's result,
    `soon` schedules a plain function on the loop."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro: Any, timeout: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def soon(self, fn: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()
