"""The commit machinery every store of this package shares: buffered batch writes flushed in
one transaction (:class:`BufferedBackingMap`), and the per-process commit scope
(:class:`CommitScope`) that lets a write to the coordinator's ``MetaStore`` join a state's
commit (:class:`MetaStoreBase`). It exists so that each store (memory, SQLite, PostgreSQL,
Redis) implements only "read these keys" and "write these items in one transaction", and gets
the same atomicity for free; the interfaces users implement are in
:mod:`squall.trident.state.interfaces`.

Commit protocol, for every store in this package:

* ``begin_commit(txid)`` opens a batch. Writes from then on are buffered in the state object
  (reads see them) and nothing reaches the store.
* ``commit(txid)`` writes the whole buffer in ONE store transaction (SQL ``BEGIN IMMEDIATE`` /
  ``BEGIN`` ... ``COMMIT``, Redis ``MULTI``/``EXEC``, a lock for memory), so a batch is either
  entirely in the store or not at all. A state that is dropped, closed or ``abort()``-ed before
  ``commit`` leaves nothing behind.
* Writes outside ``begin_commit``/``commit`` are written at once, each call in its own
  transaction.

Why buffer rather than hold the store transaction open for the whole batch: SQLite has a single
writer, so a transaction held across a batch (while user code runs) would block every other
partition, and two partition states opened one after the other in one thread would deadlock.
Partitions of one batch touch disjoint keys (they are partitioned by group key), so reading
the store and applying the buffer at commit is equivalent.

MetaStore atomicity: the states and the ``MetaStore`` of one backend instance (same store and
table/prefix) in one process share a :class:`CommitScope`. A ``MetaStore.put`` made while one or
more of those states is between ``begin_commit`` and ``commit`` is held back and written inside
the transaction of the LAST of them to commit, so it becomes visible exactly when every state
of the batch in this process has committed. If one of them aborts, is dropped without commit or
fails to commit, the waiting meta writes are discarded. A put while no state is open is written
at once. Call ``abort()`` (or ``close()``) on the states of a batch you give up on: while an
abandoned state is still alive and open, meta puts keep waiting for it.
"""

from __future__ import annotations

import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from squall.trident.state.interfaces import MetaStore, encode_key

__all__ = ["BufferedBackingMap", "CommitScope", "MetaStoreBase", "commit_scope"]

# --------------------------------------------------------------------------------------------
# Commit scope: states and meta stores of one backend instance in this process

_MISSING = object()


class CommitScope:
    """Tracks the states of one backend instance that are inside a commit, and the meta
    writes waiting for them (see the module docstring).

    States are held by weak reference: a state dropped without ``commit`` (a crash of the
    batch) is noticed at the next access and counts as aborted. There are no weakref
    callbacks, so nothing here runs in the middle of a garbage collection."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.RLock()
        self._open: dict[int, weakref.ref] = {}
        self._pending_meta: dict[str, bytes] = {}

    def _prune(self) -> None:
        dead = [k for k, r in list(self._open.items()) if r() is None]
        for k in dead:
            del self._open[k]
        if dead:  # a state of the batch was lost: the batch's meta writes go with it
            self._pending_meta.clear()

    def begin(self, backing: object) -> None:
        with self._lock:
            self._prune()
            self._open[id(backing)] = weakref.ref(backing)

    def finish(self, backing: object, committed: bool) -> dict[str, bytes]:
        """``backing`` leaves its commit. Returns the meta writes its transaction must carry:
        all that wait, if it commits and is the last open state. An abort drops them."""
        with self._lock:
            self._prune()
            ref = self._open.get(id(backing))
            if ref is not None and ref() is backing:
                del self._open[id(backing)]
            if not committed:
                self._pending_meta.clear()
                return {}
            if self._open:
                return {}
            pending, self._pending_meta = self._pending_meta, {}
            return pending

    def discard_meta(self) -> None:
        """A commit failed: the meta writes waiting for the batch must not be written."""
        with self._lock:
            self._pending_meta.clear()

    def open_count(self) -> int:
        with self._lock:
            self._prune()
            return len(self._open)

    def defer_meta(self, key: str, value: bytes) -> bool:
        """Holds a meta write for the open states' commit; False if none is open (the caller
        writes at once)."""
        with self._lock:
            self._prune()
            if not self._open:
                return False
            self._pending_meta[key] = value
            return True

    def pending_meta(self, key: str) -> Any:
        with self._lock:
            self._prune()
            return self._pending_meta.get(key, _MISSING)


_SCOPES: dict[str, CommitScope] = {}
_SCOPES_LOCK = threading.Lock()


def commit_scope(name: str) -> CommitScope:
    """The process-wide scope of the backend instance ``name`` (e.g. ``sqlite:/path:table``)."""
    with _SCOPES_LOCK:
        scope = _SCOPES.get(name)
        if scope is None:
            scope = _SCOPES[name] = CommitScope(name)
        return scope


# --------------------------------------------------------------------------------------------
# Shared implementation of the stores


class MetaStoreBase(ABC):
    """A ``MetaStore`` whose puts join the open commit of its scope (see module docstring).
    Subclasses read and write the store directly."""

    def __init__(self, scope_name: str) -> None:
        self._scope = commit_scope(scope_name)

    @abstractmethod
    def _get_now(self, key: str) -> bytes | None: ...

    @abstractmethod
    def _put_now(self, items: dict[str, bytes]) -> None:
        """Writes ``items`` in one transaction, committed on return."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def get(self, key: str) -> bytes | None:
        if not isinstance(key, str):
            raise TypeError(f"a meta key is a str, got {key!r}")
        pending = self._scope.pending_meta(key)
        if pending is not _MISSING:
            return pending
        value = self._get_now(key)
        return None if value is None else bytes(value)

    def put(self, key: str, value: bytes) -> None:
        if not isinstance(key, str):
            raise TypeError(f"a meta key is a str, got {key!r}")
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError(f"a meta value is bytes, got {type(value).__name__}")
        value = bytes(value)
        if not self._scope.defer_meta(key, value):
            self._put_now({key: value})

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BufferedBackingMap(ABC):
    """An ``IBackingMap`` that buffers the writes of a batch and writes them, with the meta
    writes of its scope, in one transaction at ``commit``. Subclasses implement ``_read`` and
    ``_write`` (and ``_close``, ``meta_store``).

    ``encode``/``decode`` turn the value objects given by the map into what the store keeps
    (JSON text) and back; ``None`` for both keeps the objects as they are (memory).
    """

    def __init__(
        self,
        scope_name: str,
        encode: Callable[[Any], Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
    ) -> None:
        self._scope = commit_scope(scope_name)
        self._encode = encode
        self._decode = decode
        self._pending: dict[str, tuple[Any, Any]] | None = None  # enc key -> (value, stored form)
        self._txid: int | None = None

    # -- store-specific ---------------------------------------------------------------------

    @abstractmethod
    def _read(self, enc_keys: list[str]) -> dict[str, Any]:
        """Stored forms by encoded key, for the keys that are present."""

    @abstractmethod
    def _write(self, items: list[tuple[str, Any]], meta: dict[str, bytes]) -> None:
        """Writes ``items`` (encoded key, stored form) and ``meta`` in ONE transaction."""

    def _close(self) -> None:  # noqa: B027 - optional hook
        pass

    @abstractmethod
    def meta_store(self) -> MetaStore: ...

    # -- IBackingMap --------------------------------------------------------------------------

    @property
    def in_commit(self) -> bool:
        return self._pending is not None

    def multi_get(self, keys: list[list]) -> list:
        return self.multi_get_encoded([encode_key(k) for k in keys])

    def multi_put(self, keys: list[list], vals: list) -> None:
        if len(keys) != len(vals):
            raise ValueError(f"multi_put: {len(keys)} keys but {len(vals)} values")
        self.multi_put_encoded([encode_key(k) for k in keys], vals)

    # the maps call these with keys they have encoded once (``encode_key``)

    def multi_get_encoded(self, enc_keys: list[str]) -> list:
        pending = self._pending or {}
        need = list(dict.fromkeys(e for e in enc_keys if e not in pending))
        stored = self._read(need) if need else {}
        decode = self._decode
        out = []
        for e in enc_keys:
            if e in pending:
                out.append(pending[e][0])
            else:
                s = stored.get(e)
                out.append(None if s is None else decode(s) if decode else s)
        return out

    def multi_put_encoded(self, enc_keys: list[str], vals: list) -> None:
        encode = self._encode
        try:
            items = [(e, v, encode(v) if encode else v) for e, v in zip(enc_keys, vals)]
        except (TypeError, ValueError) as exc:
            raise _unstorable(enc_keys, vals, encode, exc) from exc
        if self._pending is not None:
            for e, v, s in items:
                self._pending[e] = (v, s)
        elif items:
            self._write([(e, s) for e, _, s in items], {})

    # -- commit protocol ----------------------------------------------------------------------

    def begin_commit(self, txid: int | None) -> None:
        if self._pending is not None:  # the previous batch was never committed: drop it
            self.abort()
        self._pending = {}
        self._txid = txid
        self._scope.begin(self)

    def commit(self, txid: int | None) -> None:
        if self._pending is None:
            return  # no begin_commit: every write went out at once
        if txid is not None and self._txid is not None and txid != self._txid:
            raise ValueError(f"commit({txid}) does not match begin_commit({self._txid})")
        items = [(e, s) for e, (_, s) in self._pending.items()]
        self._pending = None
        self._txid = None
        meta = self._scope.finish(self, committed=True)
        if items or meta:
            try:
                self._write(items, meta)
            except BaseException:
                self._scope.discard_meta()
                raise

    def abort(self) -> None:
        """Drops the open batch's writes, and the meta writes waiting for the batch."""
        if self._pending is not None:
            self._pending = None
            self._txid = None
            self._scope.finish(self, committed=False)

    def close(self) -> None:
        self.abort()
        self._close()

    def __getstate__(self):
        raise TypeError(
            f"{type(self).__name__} holds a connection and is not picklable: pickle the state factory and "
            "make the state where it runs"
        )


def _unstorable(enc_keys: list[str], vals: list, encode: Callable[[Any], Any] | None,
                exc: Exception) -> TypeError:
    """The error for a value the store cannot keep, naming the key and saying what to do: the
    batch retries until the value is storable, so the message must be actionable."""
    for e, v in zip(enc_keys, vals):
        try:
            encode(v) if encode else None
        except (TypeError, ValueError):
            return TypeError(
                f"the state cannot store the value for key {e}: {v!r:.120} ({exc}). State values are "
                "kept as JSON: have the aggregator or updater return numbers, strings, lists or dicts "
                "(e.g. a sorted list instead of a set). The batch is retried until it commits."
            )
    return TypeError(f"the state cannot store a value: {exc}")
