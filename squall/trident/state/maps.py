"""Map states over any ``IBackingMap``, as Storm's ``TransactionalMap``, ``OpaqueMap`` and
``NonTransactionalMap``, and the factory base class the stores build on.

Within a batch a map remembers the values it wrote itself (Storm's ``CachedBatchReadsMap``): a
key updated twice in one batch builds on its own new value, while a value found in the store
with the batch's txid is a replay of that batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from squall.trident.state.interfaces import (
    IBackingMap,
    MapState,
    MetaStore,
    ValueUpdater,
    apply_updater,
    check_kind,
    encode_key,
)
from squall.trident.state.values import OpaqueValue, TransactionalValue

__all__ = [
    "BackingMapStateFactory",
    "NonTransactionalMap",
    "OpaqueMap",
    "TransactionalMap",
    "build_map_state",
]


class _BatchReadsCache:
    """The values written during the current batch, in front of the backing map. Keys are
    encoded once per call (``encode_key``) and handed to the backing map encoded when it
    accepts them (``multi_get_encoded``/``multi_put_encoded``)."""

    def __init__(self, delegate: IBackingMap) -> None:
        self.delegate = delegate
        self._cached: dict[str, Any] = {}
        self._get_enc = getattr(delegate, "multi_get_encoded", None)
        self._put_enc = getattr(delegate, "multi_put_encoded", None)

    def reset(self) -> None:
        self._cached.clear()

    def multi_get(self, keys: list[list], enc: list[str]) -> list[tuple[Any, bool]]:
        vals = self._get_enc(enc) if self._get_enc is not None else self.delegate.multi_get(keys)
        cached = self._cached
        return [(cached[e], True) if e in cached else (v, False) for e, v in zip(enc, vals)]

    def multi_put(self, keys: list[list], enc: list[str], vals: list) -> None:
        if self._put_enc is not None:
            self._put_enc(enc, vals)
        else:
            self.delegate.multi_put(keys, vals)
        self._cached.update(zip(enc, vals))


def _check_lengths(what: str, keys: list, other: list) -> None:
    if len(keys) != len(other):
        raise ValueError(f"{what}: {len(keys)} keys but {len(other)} values/updaters")


class _MapBase(MapState):
    def __init__(self, backing: IBackingMap) -> None:
        self.backing = backing
        self._curr_tx: int | None = None

    @property
    def current_txid(self) -> int | None:
        """The txid of the open batch, ``None`` outside ``begin_commit``/``commit``."""
        return self._curr_tx

    def _reset(self) -> None:
        pass

    def begin_commit(self, txid: int | None) -> None:
        self._curr_tx = txid
        self._reset()
        begin = getattr(self.backing, "begin_commit", None)
        if begin is not None:
            begin(txid)

    def commit(self, txid: int | None) -> None:
        self._curr_tx = None
        self._reset()
        commit = getattr(self.backing, "commit", None)
        if commit is not None:
            commit(txid)

    def abort(self) -> None:
        """Gives up the open batch: none of its writes reach the store."""
        self._curr_tx = None
        self._reset()
        abort = getattr(self.backing, "abort", None)
        if abort is not None:
            abort()

    def close(self) -> None:
        """Aborts an open batch and closes the store connection."""
        self._curr_tx = None
        self._reset()
        close = getattr(self.backing, "close", None)
        if close is not None:
            close()

    def meta_store(self) -> MetaStore:
        """The ``MetaStore`` of this state's backend instance."""
        meta_store = getattr(self.backing, "meta_store", None)
        if meta_store is None:
            raise TypeError(f"{type(self.backing).__name__} has no meta store")
        return meta_store()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.backing!r})"


class TransactionalMap(_MapBase):
    """Stores ``TransactionalValue(txid, val)``; a key already written by the current txid (a
    replayed batch) is left as it is."""

    def __init__(self, backing: IBackingMap) -> None:
        super().__init__(backing)
        self._cache = _BatchReadsCache(backing)

    @classmethod
    def build(cls, backing: IBackingMap) -> TransactionalMap:
        return cls(backing)

    def _reset(self) -> None:
        self._cache.reset()

    def multi_get(self, keys: list[list]) -> list:
        enc = [encode_key(k) for k in keys]
        return [None if v is None else v.val for v, _ in self._cache.multi_get(keys, enc)]

    def multi_update(self, keys: list[list], updaters: list[ValueUpdater]) -> list:
        _check_lengths("multi_update", keys, updaters)
        enc = [encode_key(k) for k in keys]
        curr = self._cache.multi_get(keys, enc)
        tx = self._curr_tx
        ret, new_keys, new_enc, new_vals = [], [], [], []
        for key, e, (val, cached), updater in zip(keys, enc, curr, updaters):
            if val is None:
                new = TransactionalValue(tx, apply_updater(updater, None))
            elif tx is not None and val.txid >= tx and not cached:
                # this batch was applied before: a replay (==), or a batch older than the stored
                # one (>), which committed before it since txids commit in order: Spark
                # recomputing a lost task from its lineage runs old batches' commits again
                ret.append(val.val)
                continue
            else:
                new = TransactionalValue(tx, apply_updater(updater, val.val))
            ret.append(new.val)
            new_keys.append(key)
            new_enc.append(e)
            new_vals.append(new)
        if new_keys:
            self._cache.multi_put(new_keys, new_enc, new_vals)
        return ret

    def multi_put(self, keys: list[list], vals: list) -> None:
        _check_lengths("multi_put", keys, vals)
        enc = [encode_key(k) for k in keys]
        self._cache.multi_put(keys, enc, [TransactionalValue(self._curr_tx, v) for v in vals])


class OpaqueMap(_MapBase):
    """Stores ``OpaqueValue(txid, curr, prev)``; a replayed txid is recomputed from ``prev``, so
    a replay whose tuples differ replaces the first attempt's effect."""

    def __init__(self, backing: IBackingMap) -> None:
        super().__init__(backing)
        self._cache = _BatchReadsCache(backing)

    @classmethod
    def build(cls, backing: IBackingMap) -> OpaqueMap:
        return cls(backing)

    def _reset(self) -> None:
        self._cache.reset()

    def _base(self, val: OpaqueValue | None, cached: bool) -> Any:
        if val is None:
            return None
        return val.curr if cached else val.get(self._curr_tx)

    def multi_get(self, keys: list[list]) -> list:
        enc = [encode_key(k) for k in keys]
        return [self._base(v, cached) for v, cached in self._cache.multi_get(keys, enc)]

    def multi_update(self, keys: list[list], updaters: list[ValueUpdater]) -> list:
        _check_lengths("multi_update", keys, updaters)
        enc = [encode_key(k) for k in keys]
        curr = self._cache.multi_get(keys, enc)
        tx = self._curr_tx
        ret, new_keys, new_enc, new_vals = [], [], [], []
        for key, e, (val, cached), updater in zip(keys, enc, curr, updaters):
            if val is not None and not cached and tx is not None and val.curr_txid > tx:
                ret.append(val.curr)  # an older batch, committed before the stored one (see TransactionalMap)
                continue
            new = apply_updater(updater, self._base(val, cached))
            ret.append(new)
            new_keys.append(key)
            new_enc.append(e)
            new_vals.append(OpaqueValue(tx, new) if val is None else val.update(tx, new))
        if new_keys:
            self._cache.multi_put(new_keys, new_enc, new_vals)
        return ret

    def multi_put(self, keys: list[list], vals: list) -> None:
        _check_lengths("multi_put", keys, vals)
        self.multi_update(keys, [_Replace(v) for v in vals])


class _Replace:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self, _old: Any) -> Any:
        return self.value


class NonTransactionalMap(_MapBase):
    """Stores plain values: a replayed batch is applied again (at-least-once). The store still
    writes each batch in one transaction."""

    @classmethod
    def build(cls, backing: IBackingMap) -> NonTransactionalMap:
        return cls(backing)

    def multi_get(self, keys: list[list]) -> list:
        return self.backing.multi_get(keys)

    def multi_update(self, keys: list[list], updaters: list[ValueUpdater]) -> list:
        _check_lengths("multi_update", keys, updaters)
        get_enc = getattr(self.backing, "multi_get_encoded", None)
        put_enc = getattr(self.backing, "multi_put_encoded", None)
        if get_enc is not None and put_enc is not None:
            enc = [encode_key(k) for k in keys]
            ret = [apply_updater(u, v) for u, v in zip(updaters, get_enc(enc))]
            put_enc(enc, ret)
        else:
            ret = [apply_updater(u, v) for u, v in zip(updaters, self.backing.multi_get(keys))]
            self.backing.multi_put(keys, ret)
        return ret

    def multi_put(self, keys: list[list], vals: list) -> None:
        _check_lengths("multi_put", keys, vals)
        self.backing.multi_put(keys, vals)


_MAP_CLASSES: dict[str, type[_MapBase]] = {
    "transactional": TransactionalMap,
    "opaque": OpaqueMap,
    "non-transactional": NonTransactionalMap,
}


def build_map_state(kind: str, backing: IBackingMap) -> MapState:
    """The map state of ``kind`` over ``backing``."""
    return _MAP_CLASSES[check_kind(kind)](backing)


class BackingMapStateFactory(ABC):
    """A ``StateFactory`` whose states are a map of ``self.kind`` over a backing map.
    Subclasses are small picklable dataclasses (configuration only)."""

    kind: str

    @abstractmethod
    def make_backing(self, conf: dict, partition_index: int, num_partitions: int) -> IBackingMap: ...

    @abstractmethod
    def meta_store(self, conf: dict | None = None) -> MetaStore: ...

    @abstractmethod
    def describe(self) -> str: ...

    def make_state(self, conf: dict | None = None, partition_index: int = 0, num_partitions: int = 1) -> MapState:
        return build_map_state(self.kind, self.make_backing(conf or {}, partition_index, num_partitions))
