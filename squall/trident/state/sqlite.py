"""The embedded default store: map states in a SQLite file.

One table per state (``squall_state`` by default): ``k`` the JSON of the key list, ``v`` the
JSON of the stored value (a ``TransactionalValue``/``OpaqueValue`` via ``to_json``, or the
plain value). The ``MetaStore`` is the table ``squall_meta`` of the same file, one namespace
per state table, so a batch's state rows and the coordinator's records commit in one SQL
transaction.

Several partitions in several processes (Spark executors) write one file: every state has its
own connection (opened lazily, so the factory pickles), the file is in WAL mode (readers do not
block the writer) and a busy timeout makes writers queue for the single write lock. A batch
holds that lock only while its buffered rows are written (``BEGIN IMMEDIATE``, ``executemany``
upserts, meta rows, ``COMMIT``).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from typing import Any

from squall.trident.state.commit import BufferedBackingMap, MetaStoreBase
from squall.trident.state.interfaces import check_identifier, check_kind
from squall.trident.state.maps import BackingMapStateFactory
from squall.trident.state.values import value_codec

__all__ = ["SQLiteMapState", "SQLiteMetaStore", "SQLiteStateFactory"]

META_TABLE = "squall_meta"
_READ_CHUNK = 500  # keys per SELECT ... IN (...)


def _connect(path: str, table: str, busy_timeout_ms: int) -> sqlite3.Connection:
    # isolation_level=None: no implicit transactions; we issue BEGIN IMMEDIATE / COMMIT ourselves
    conn = sqlite3.connect(path, timeout=busy_timeout_ms / 1000.0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f'CREATE TABLE IF NOT EXISTS "{table}" (k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID')
        conn.execute(
            f'CREATE TABLE IF NOT EXISTS "{META_TABLE}" '
            "(ns TEXT NOT NULL, k TEXT NOT NULL, v BLOB NOT NULL, PRIMARY KEY (ns, k)) WITHOUT ROWID"
        )
    except BaseException:
        conn.close()
        raise
    return conn


def _upsert_meta(conn: sqlite3.Connection, ns: str, meta: dict[str, bytes]) -> None:
    conn.executemany(
        f'INSERT INTO "{META_TABLE}" (ns, k, v) VALUES (?, ?, ?) ON CONFLICT (ns, k) DO UPDATE SET v = excluded.v',
        [(ns, k, v) for k, v in meta.items()],
    )


def _in_transaction(conn: sqlite3.Connection, body) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        body()
        conn.execute("COMMIT")
    except BaseException:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the connection is gone or the transaction already ended: nothing was committed
        raise


class SQLiteMapState(BufferedBackingMap):
    """The SQLite backing map of one state (one connection)."""

    def __init__(self, path: str, kind: str, table: str = "squall_state", busy_timeout_ms: int = 30_000) -> None:
        self.path = path
        self.kind = check_kind(kind)
        self.table = check_identifier(table)
        self.busy_timeout_ms = busy_timeout_ms
        super().__init__(_scope_name(path, table), *value_codec(kind))
        self._conn_: sqlite3.Connection | None = None

    @classmethod
    def factory(
        cls, path: str | os.PathLike, kind: str = "opaque", table: str = "squall_state", busy_timeout_ms: int = 30_000
    ) -> SQLiteStateFactory:
        return SQLiteStateFactory(os.fspath(path), kind, table, busy_timeout_ms)

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._conn_ is None:
            self._conn_ = _connect(self.path, self.table, self.busy_timeout_ms)
        return self._conn_

    def _read(self, enc_keys: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        conn = self._conn
        for i in range(0, len(enc_keys), _READ_CHUNK):
            chunk = enc_keys[i : i + _READ_CHUNK]
            marks = ",".join("?" * len(chunk))
            out.update(conn.execute(f'SELECT k, v FROM "{self.table}" WHERE k IN ({marks})', chunk).fetchall())
        return out

    def _write_state_rows(self, conn: sqlite3.Connection, items: list[tuple[str, Any]]) -> None:
        conn.executemany(
            f'INSERT INTO "{self.table}" (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v', items
        )

    def _write_meta_rows(self, conn: sqlite3.Connection, meta: dict[str, bytes]) -> None:
        _upsert_meta(conn, self.table, meta)

    def _write(self, items: list[tuple[str, Any]], meta: dict[str, bytes]) -> None:
        conn = self._conn

        def body() -> None:
            if items:
                self._write_state_rows(conn, items)
            if meta:
                self._write_meta_rows(conn, meta)

        _in_transaction(conn, body)

    def _close(self) -> None:
        if self._conn_ is not None:
            self._conn_.close()
            self._conn_ = None

    def meta_store(self) -> SQLiteMetaStore:
        return SQLiteMetaStore(self.path, self.table, self.busy_timeout_ms)

    def __repr__(self) -> str:
        return f"SQLiteMapState({self.path!r}, {self.kind!r}, table={self.table!r})"


def _scope_name(path: str, table: str) -> str:
    return f"sqlite:{os.path.realpath(path)}:{table}"


class SQLiteMetaStore(MetaStoreBase):
    """The coordinator's records in ``squall_meta`` (namespace: the state table)."""

    def __init__(self, path: str, table: str = "squall_state", busy_timeout_ms: int = 30_000) -> None:
        super().__init__(_scope_name(path, table))
        self.path = path
        self.table = check_identifier(table)
        self.busy_timeout_ms = busy_timeout_ms
        self._conn_: sqlite3.Connection | None = None

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._conn_ is None:
            self._conn_ = _connect(self.path, self.table, self.busy_timeout_ms)
        return self._conn_

    def _get_now(self, key: str) -> bytes | None:
        row = self._conn.execute(f'SELECT v FROM "{META_TABLE}" WHERE ns = ? AND k = ?', (self.table, key)).fetchone()
        return None if row is None else row[0]

    def _put_now(self, items: dict[str, bytes]) -> None:
        conn = self._conn
        _in_transaction(conn, lambda: _upsert_meta(conn, self.table, items))

    def close(self) -> None:
        if self._conn_ is not None:
            self._conn_.close()
            self._conn_ = None


@dataclass(frozen=True)
class SQLiteStateFactory(BackingMapStateFactory):
    """Picklable configuration of SQLite map states (the path is made absolute)."""

    HOST_LOCAL = True  # a file on the disk of whichever host runs the state task (engine.spark.host_local)

    path: str
    kind: str = "opaque"
    table: str = "squall_state"
    busy_timeout_ms: int = 30_000

    def __post_init__(self) -> None:
        check_kind(self.kind)
        check_identifier(self.table)
        if self.path == ":memory:" or self.path.startswith("file::memory:"):
            raise ValueError("an in-memory SQLite database is private to one connection: use MemoryMapState.factory")
        object.__setattr__(self, "path", os.path.abspath(self.path))

    def make_backing(self, conf: dict, partition_index: int, num_partitions: int) -> SQLiteMapState:
        return SQLiteMapState(self.path, self.kind, self.table, self.busy_timeout_ms)

    def meta_store(self, conf: dict | None = None) -> SQLiteMetaStore:
        return SQLiteMetaStore(self.path, self.table, self.busy_timeout_ms)

    def describe(self) -> str:
        return f"sqlite {self.kind} map state ({self.path}, table {self.table})"

    def drop(self) -> None:
        """Deletes the state table and this table's meta records."""
        conn = _connect(self.path, self.table, self.busy_timeout_ms)
        try:

            def body() -> None:
                conn.execute(f'DROP TABLE IF EXISTS "{self.table}"')
                conn.execute(f'DELETE FROM "{META_TABLE}" WHERE ns = ?', (self.table,))

            _in_transaction(conn, body)
        finally:
            conn.close()
