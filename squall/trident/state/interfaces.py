"""What a Trident state is, for the people who write or use one: Storm's ``State``,
``MapState``, ``IBackingMap``, ``StateFactory`` and ``MetaStore`` interfaces, and the small
helpers a store or a user's state calls (``check_kind``, ``apply_updater``, ``encode_key``...).

Kept apart from :mod:`squall.trident.state.commit` (how the stores of this package make a
batch atomic) so that implementing a state means reading this module only; nothing here
depends on that machinery.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "KINDS",
    "IBackingMap",
    "MapState",
    "MetaStore",
    "State",
    "StateFactory",
    "ValueUpdater",
    "apply_updater",
    "check_identifier",
    "check_kind",
    "encode_key",
]

KINDS = ("transactional", "opaque", "non-transactional")

#: old value (``None`` when absent) -> new value; an object with ``update(old)`` (Storm's
#: ``ValueUpdater``) is accepted as well.
ValueUpdater = Callable[[Any], Any]


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown state kind {kind!r}: use one of {', '.join(repr(k) for k in KINDS)}")
    return kind


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check_identifier(name: str, what: str = "table") -> str:
    """A table name or prefix used in SQL or Redis keys: letters, digits, underscores."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"invalid {what} name {name!r}: use letters, digits and underscores (at most 63)")
    return name


def apply_updater(updater: Any, old: Any) -> Any:
    if callable(updater):
        return updater(old)
    update = getattr(updater, "update", None)
    if update is None:
        raise TypeError(f"an updater is a callable old -> new (or has update(old)), got {updater!r}")
    return update(old)


_KEY_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def encode_key(key: Sequence[Any]) -> str:
    """The canonical text of a state key (a list of JSON-able primitives, e.g. the group-by
    values): compact JSON of the list. Equal keys, lists or tuples, give equal text."""
    t = type(key)
    if t is not list:
        if t is tuple or (isinstance(key, Sequence) and not isinstance(key, str | bytes | bytearray)):
            key = list(key)
        else:
            raise TypeError(f"a state key is a list of values (the group-by fields), got {key!r}")
    try:
        return _KEY_ENCODER(key)
    except (TypeError, ValueError) as e:
        raise TypeError(f"a state key holds JSON-able primitives (str, int, float, bool, None): {key!r}: {e}") from None


# --------------------------------------------------------------------------------------------
# Interfaces


class State(ABC):
    """Storm's ``State``: updates of a batch happen between ``begin_commit(txid)`` and
    ``commit(txid)``; batches commit strictly in txid order."""

    @abstractmethod
    def begin_commit(self, txid: int | None) -> None: ...

    @abstractmethod
    def commit(self, txid: int | None) -> None: ...


class MapState(State):
    """Storm's ``MapState``: a keyed state. A key is a list of values (``[word]``)."""

    @abstractmethod
    def multi_get(self, keys: list[list]) -> list:
        """The values of ``keys``, ``None`` where a key has none."""

    @abstractmethod
    def multi_put(self, keys: list[list], vals: list) -> None: ...

    @abstractmethod
    def multi_update(self, keys: list[list], updaters: list[ValueUpdater]) -> list:
        """Applies ``updaters[i]`` to the value of ``keys[i]``; returns the new values."""


@runtime_checkable
class IBackingMap(Protocol):
    """What a store provides under ``TransactionalMap``/``OpaqueMap``/``NonTransactionalMap``:
    it stores whatever value objects the map gives it. A backing map may also have
    ``begin_commit(txid)``/``commit(txid)`` (the maps forward them), ``abort()``, ``close()``
    and ``meta_store()``."""

    def multi_get(self, keys: list[list]) -> list: ...

    def multi_put(self, keys: list[list], vals: list) -> None: ...


@runtime_checkable
class MetaStore(Protocol):
    """A small durable key-value store next to a state (the coordinator's records)."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, value: bytes) -> None: ...


@runtime_checkable
class StateFactory(Protocol):
    """Makes the state of one partition; pickled to where the partition runs, so it holds
    configuration only (connections are opened by the states, lazily)."""

    kind: str  # "transactional" | "opaque" | "non-transactional"

    def make_state(self, conf: dict, partition_index: int, num_partitions: int) -> State: ...

    def describe(self) -> str: ...

    def meta_store(self, conf: dict | None = None) -> MetaStore: ...
