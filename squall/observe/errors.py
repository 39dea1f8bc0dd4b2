"""Errors raised in user code, kept with where they happened and the tuple that caused them."""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any

MAX_VALUES_CHARS = 200


def truncate_values(values: Any, limit: int = MAX_VALUES_CHARS) -> str | None:
    if values is None:
        return None
    s = repr(values)
    return s if len(s) <= limit else s[: limit - 3] + "..."


@dataclass(frozen=True)
class ErrorRecord:
    component: str
    task: int
    error: str  # "ExceptionType: message"
    traceback: str
    values: str | None  # the input's values, truncated
    kind: str = "error"  # "error" (execute raised), "reported" (report_error), "user" (API misuse)
    time: float = 0.0

    @classmethod
    def from_exception(cls, component: str, task: int, exc: BaseException | str, values: Any = None,
                       kind: str = "error") -> ErrorRecord:
        if isinstance(exc, BaseException):
            err = f"{type(exc).__name__}: {exc}"
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        else:
            err, tb = str(exc), ""
        return cls(component, task, err, tb, truncate_values(values), kind, time.time())

    def __str__(self) -> str:
        where = f"{self.component}[task {self.task}]"
        on = f" on {self.values}" if self.values else ""
        return f"{self.kind} in {where}{on}: {self.error}"
