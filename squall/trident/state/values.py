"""The values a Trident map state stores per key, as in Storm's ``TransactionalValue`` and
``OpaqueValue``, plus their JSON form for the stores that keep text.

A transactional value remembers the txid of the batch that last wrote it, so a replayed batch
(same txid, same tuples) is recognised and not applied twice. An opaque value also keeps the
value from before that batch (``prev``), so a replayed txid whose tuples differ is recomputed on
top of ``prev`` instead of being skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = [
    "OpaqueValue",
    "TransactionalValue",
    "value_codec",
]

_JSON_SEPARATORS = (",", ":")


_dumps = json.JSONEncoder(separators=_JSON_SEPARATORS, ensure_ascii=False, allow_nan=False).encode


def _loads_object(data: str | bytes, what: str) -> dict:
    obj = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError(f"not a stored {what}: {data!r}")
    return obj


class TransactionalValue:
    """``(txid, val)``: ``val`` as written by the batch ``txid``."""

    __slots__ = ("txid", "val")

    def __init__(self, txid: int | None, val: Any) -> None:
        self.txid = txid
        self.val = val

    def get_txid(self) -> int | None:
        return self.txid

    def get_val(self) -> Any:
        return self.val

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransactionalValue):
            return NotImplemented
        return self.txid == other.txid and self.val == other.val

    def __hash__(self) -> int:  # values may be unhashable; fall back to the txid alone
        return hash(("TransactionalValue", self.txid))

    def __repr__(self) -> str:
        return f"TransactionalValue(txid={self.txid!r}, val={self.val!r})"

    def to_dict(self) -> dict:
        return {"txid": self.txid, "val": self.val}

    @classmethod
    def from_dict(cls, d: dict) -> TransactionalValue:
        try:
            return cls(d["txid"], d["val"])
        except KeyError as e:
            raise ValueError(f"not a stored TransactionalValue (missing {e}): {d!r}") from None

    def to_json(self) -> str:
        return _dumps(self.to_dict())

    @classmethod
    def from_json(cls, data: str | bytes) -> TransactionalValue:
        return cls.from_dict(_loads_object(data, "TransactionalValue"))


class OpaqueValue:
    """``(curr_txid, curr, prev)``: ``curr`` as written by batch ``curr_txid``, and ``prev``, the
    value before that batch.

    ``get(txid)`` is the value a batch ``txid`` must build on: ``curr`` for a later batch (or
    ``None``: outside any batch), ``prev`` for a replay of ``curr_txid``. An earlier batch is an
    error: the state has moved past it.
    """

    __slots__ = ("curr", "curr_txid", "prev")

    def __init__(self, curr_txid: int | None, curr: Any, prev: Any = None) -> None:
        self.curr_txid = curr_txid
        self.curr = curr
        self.prev = prev

    def _behind(self, txid: int) -> ValueError:
        return ValueError(
            f"batch txid {txid} is behind the state's batch txid {self.curr_txid} ({self!r}): "
            "batches must be applied in txid order and a committed batch cannot be reopened"
        )

    def _is_later(self, txid: int | None) -> bool:
        return txid is None or self.curr_txid is None or self.curr_txid < txid

    def get(self, txid: int | None) -> Any:
        if self._is_later(txid):
            return self.curr
        if txid == self.curr_txid:
            return self.prev
        raise self._behind(txid)

    def update(self, txid: int | None, new: Any) -> OpaqueValue:
        """The value after batch ``txid`` wrote ``new``: a replay of ``curr_txid`` keeps ``prev``,
        a later batch makes ``curr`` the new ``prev``."""
        if self._is_later(txid):
            return OpaqueValue(txid, new, self.curr)
        if txid == self.curr_txid:
            return OpaqueValue(self.curr_txid, new, self.prev)
        raise self._behind(txid)

    def get_curr(self) -> Any:
        return self.curr

    def get_curr_txid(self) -> int | None:
        return self.curr_txid

    def get_prev(self) -> Any:
        return self.prev

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpaqueValue):
            return NotImplemented
        return self.curr_txid == other.curr_txid and self.curr == other.curr and self.prev == other.prev

    def __hash__(self) -> int:
        return hash(("OpaqueValue", self.curr_txid))

    def __repr__(self) -> str:
        return f"OpaqueValue(curr_txid={self.curr_txid!r}, curr={self.curr!r}, prev={self.prev!r})"

    def to_dict(self) -> dict:
        return {"curr_txid": self.curr_txid, "curr": self.curr, "prev": self.prev}

    @classmethod
    def from_dict(cls, d: dict) -> OpaqueValue:
        try:
            return cls(d["curr_txid"], d["curr"], d.get("prev"))
        except KeyError as e:
            raise ValueError(f"not a stored OpaqueValue (missing {e}): {d!r}") from None

    def to_json(self) -> str:
        return _dumps(self.to_dict())

    @classmethod
    def from_json(cls, data: str | bytes) -> OpaqueValue:
        return cls.from_dict(_loads_object(data, "OpaqueValue"))


def _encode_transactional(v: TransactionalValue | None) -> str:
    if v is None:
        return "null"
    if not isinstance(v, TransactionalValue):
        raise TypeError(f"a transactional state stores TransactionalValue, got {v!r}")
    return v.to_json()


def _decode_transactional(s: str | bytes) -> TransactionalValue | None:
    obj = json.loads(s)
    if obj is None:
        return None
    if not isinstance(obj, dict) or "txid" not in obj:
        _bad(s, "Transactional")
    return TransactionalValue.from_dict(obj)


def _encode_opaque(v: OpaqueValue | None) -> str:
    if v is None:
        return "null"
    if not isinstance(v, OpaqueValue):
        raise TypeError(f"an opaque state stores OpaqueValue, got {v!r}")
    return v.to_json()


def _decode_opaque(s: str | bytes) -> OpaqueValue | None:
    obj = json.loads(s)
    if obj is None:
        return None
    if not isinstance(obj, dict) or "curr_txid" not in obj:
        _bad(s, "Opaque")
    return OpaqueValue.from_dict(obj)


def _bad(s: str | bytes, what: str) -> None:
    raise ValueError(f"stored value {s!r} is not a {what}Value: was this table written by a state of another kind?")


def _decode_plain(s: str | bytes) -> Any:
    return json.loads(s)


def value_codec(kind: str) -> tuple[Callable[[Any], str], Callable[[str | bytes], Any]]:
    """``(encode, decode)`` between what a map of ``kind`` stores and JSON text; ``None`` (a
    removed value) is stored as ``null``."""
    if kind == "transactional":
        return _encode_transactional, _decode_transactional
    if kind == "opaque":
        return _encode_opaque, _decode_opaque
    if kind == "non-transactional":
        return _dumps, _decode_plain
    raise ValueError(f"unknown state kind {kind!r}: use 'transactional', 'opaque' or 'non-transactional'")
