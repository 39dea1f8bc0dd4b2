"""Failure records and dead-letter metadata: why a message left the source, in a form every broker
can carry (message headers for RabbitMQ and NATS, entry fields for Redis), and read back.

A message is attempted at most `max_retries + 1` times: attempt 1 is the first delivery, and
the failure of attempt `max_retries + 1` dead-letters it, with the reason.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

MAX_ERROR_CHARS = 2000

# Dead-letter metadata, as message headers (RabbitMQ, NATS) or entry fields (Redis).
DL_REASON = "squall-reason"  # decode | error | failed | timeout | lost
DL_ERROR = "squall-error"  # the error text (one line, at most MAX_ERROR_CHARS)
DL_ATTEMPTS = "squall-attempts"  # deliveries the message had, the last one included
DL_COMPONENT = "squall-component"  # where the tree failed, when known
DL_TASK = "squall-task"
DL_SOURCE = "squall-source"  # the queue / stream the message came from
DL_SOURCE_ID = "squall-source-id"  # its id there (delivery tag, entry id, stream sequence)
DL_FAILED_AT = "squall-failed-at"  # unix time, seconds


def one_line(text: Any, limit: int = MAX_ERROR_CHARS) -> str:
    """Text fit for a header: one line, printable, at most `limit` characters."""
    s = " | ".join(part.strip() for part in str(text).splitlines() if part.strip())
    s = "".join(ch if ch.isprintable() else "?" for ch in s)
    return s if len(s) <= limit else s[: limit - 3] + "..."


@dataclass(frozen=True)
class Failure:
    """Why a message is dead-lettered: the kind (decode, error, failed, timeout, lost), the error
    text, where the tree failed (component and task, when known) and how many deliveries it had."""

    kind: str
    error: str | None = None
    attempts: int = 1
    component: str | None = None
    task: int | None = None

    @classmethod
    def from_reason(cls, reason: Any, attempts: int) -> Failure:
        """From a squall.FailReason (or None: a plain fail)."""
        if reason is None:
            return cls("failed", None, attempts)
        return cls(getattr(reason, "kind", None) or "failed", getattr(reason, "error", None), attempts,
                   getattr(reason, "component", None), getattr(reason, "task", None))

    def fields(self, source: str, source_id: Any) -> dict[str, str]:
        """The dead-letter metadata, as str -> str (headers or stream fields)."""
        out = {DL_REASON: self.kind, DL_ATTEMPTS: str(self.attempts), DL_SOURCE: str(source),
               DL_SOURCE_ID: str(source_id), DL_FAILED_AT: f"{time.time():.3f}"}
        if self.error:
            out[DL_ERROR] = one_line(self.error)
        if self.component is not None:
            out[DL_COMPONENT] = str(self.component)
        if self.task is not None:
            out[DL_TASK] = str(self.task)
        return out

    def __str__(self) -> str:
        where = f" in {self.component}[{self.task}]" if self.component is not None else ""
        err = f": {self.error}" if self.error else ""
        return f"{self.kind}{where} after {self.attempts} attempt(s){err}"


def dead_letter_info(fields: dict[Any, Any]) -> dict[str, str]:
    """The squall-* metadata of a dead letter (headers or fields, str or bytes), str -> str."""
    out = {}
    for k, v in (fields or {}).items():
        k = k.decode() if isinstance(k, bytes) else str(k)
        if k.lower().startswith("squall-"):
            out[k.lower()] = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    return out
