"""Where a root that keeps killing its wave goes after `squall.max.replays` attempts."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Protocol


class DeadLetterSink(Protocol):
    def write(self, record: dict[str, Any]) -> None: ...


class JsonLinesDeadLetters:
    """Appends one JSON object per dead-lettered tuple to a file (the default sink)."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps({"time": time.time(), **record}, default=repr)
        with self._lock:
            d = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(d, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


def make_sink(conf: dict) -> DeadLetterSink:
    sink = conf.get("squall.dead.letter.sink")
    if sink is not None:
        if not callable(getattr(sink, "write", None)):
            raise TypeError("squall.dead.letter.sink must have a write(record: dict) method")
        return sink
    return JsonLinesDeadLetters(conf.get("squall.dead.letter.path") or "squall-dead-letters.jsonl")
