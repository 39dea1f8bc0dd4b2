"""The names the broker connectors share, importable from one place (the code itself is split
by job): payload schemes (`schemes`), failure records and dead-letter
metadata (`dead_letters`), connection settings and secrets (`settings`), the retry backoff
(`backoff`), the queue spout (`spout`) and its I/O-thread model (`io_thread`).

`squall.connectors.base.dead_letter_info(headers)` reads a dead letter's squall-* metadata back.
"""

from __future__ import annotations

from squall.connectors.backoff import Backoff
from squall.connectors.dead_letters import (
    DL_ATTEMPTS,
    DL_COMPONENT,
    DL_ERROR,
    DL_FAILED_AT,
    DL_REASON,
    DL_SOURCE,
    DL_SOURCE_ID,
    DL_TASK,
    MAX_ERROR_CHARS,
    Failure,
    dead_letter_info,
    one_line,
)
from squall.connectors.io_thread import IOThreadBrokerSpout
from squall.connectors.schemes import PREVIEW_BYTES, SCHEMES, DecodeError, Scheme
from squall.connectors.settings import (
    Secret,
    describe_error,
    env_first,
    redact_url,
    scrub,
    url_password,
    url_with_password,
)
from squall.connectors.spout import MAX_BAD_PER_CALL, MAX_RETRIES_KEY, BrokerSpout, Message, SpoutCounters

__all__ = [
    "DL_ATTEMPTS", "DL_COMPONENT", "DL_ERROR", "DL_FAILED_AT", "DL_REASON", "DL_SOURCE", "DL_SOURCE_ID", "DL_TASK",
    "MAX_BAD_PER_CALL", "MAX_ERROR_CHARS", "MAX_RETRIES_KEY", "PREVIEW_BYTES", "SCHEMES",
    "Backoff", "BrokerSpout", "DecodeError", "Failure", "IOThreadBrokerSpout", "Message", "Scheme", "Secret",
    "SpoutCounters", "dead_letter_info", "describe_error", "env_first", "one_line", "redact_url", "scrub",
    "url_password", "url_with_password",
]
