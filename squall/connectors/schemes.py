"""Payload schemes: how a spout turns a broker payload (bytes) into the value it emits.

A payload that does not decode raises DecodeError with a one-line reason and a short preview of
the bytes, so that the dead letter says why. Payloads are never unpickled.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

SCHEMES = ("string", "json", "bytes")
PREVIEW_BYTES = 40


class DecodeError(ValueError):
    """A payload the spout's scheme cannot decode; the message says why, in one line."""


def preview(payload: bytes) -> str:
    """The first PREVIEW_BYTES of a payload, for error texts (never the whole of a large one)."""
    head = bytes(payload[:PREVIEW_BYTES])
    return repr(head) + ("..." if len(payload) > PREVIEW_BYTES else "")


def _decode_string(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError(f"payload is not valid UTF-8 ({e.reason} at byte {e.start}): {preview(payload)}") from None


def _decode_json(payload: bytes) -> Any:
    text = _decode_string(payload)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DecodeError(f"payload is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}): "
                          f"{preview(payload)}") from None


def _decode_bytes(payload: bytes) -> bytes:
    return bytes(payload)


_BUILTIN: dict[str, Callable[[bytes], Any]] = {"string": _decode_string, "json": _decode_json, "bytes": _decode_bytes}


class Scheme:
    """Turns a payload (bytes) into the value the spout emits.

    `scheme` is "string" (UTF-8 text), "json" (UTF-8 JSON, any JSON value) or "bytes" (as is),
    or a callable bytes -> value; whatever it raises becomes a DecodeError.
    """

    def __init__(self, scheme: str | Callable[[bytes], Any] = "string"):
        if callable(scheme):
            self.name = getattr(scheme, "__name__", type(scheme).__name__)
            self._fn = scheme
            self._custom = True
        elif scheme in _BUILTIN:
            self.name = scheme
            self._fn = _BUILTIN[scheme]
            self._custom = False
        else:
            raise ValueError(f"unknown scheme {scheme!r}: use one of {SCHEMES} or a callable bytes -> value")

    def decode(self, payload: bytes) -> Any:
        if not self._custom:
            return self._fn(payload)
        try:
            return self._fn(payload)
        except DecodeError:
            raise
        except Exception as e:  # noqa: BLE001 - a user scheme's error is a decode failure
            raise DecodeError(f"scheme {self.name} cannot decode payload ({type(e).__name__}: {e}): "
                              f"{preview(payload)}") from None

    def decode_all(self, payloads: list[bytes]) -> list[Any] | None:
        """Every payload decoded in one pass, or None when one does not decode (or the scheme is
        a user's): then decode each, to say which and why."""
        if self._custom:
            return None
        fn = self._fn  # the built-in decoder `decode` calls, without its per-payload layers
        try:
            return [fn(p) for p in payloads]
        except (AttributeError, TypeError, ValueError):  # a tombstone (None), not UTF-8, not JSON
            return None

    def __repr__(self) -> str:
        return f"Scheme({self.name!r})"
