"""Where a stateful bolt's KeyValueState is kept: the provider interface, memory and SQLite.

A provider stores, per namespace (topology/component/task), the committed key-value pairs and
the txid of the last commit, with Storm's two-phase checkpoint: `prepare` writes the changes
of a txid aside (not visible as committed), `commit` promotes them atomically together with
the txid, `rollback` drops what was prepared. Keys and values arrive as bytes (serialized by
the state). Providers travel with the bolt between waves on Spark, so they hold no open
connection when pickled: connections are opened lazily, on first use after unpickling.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

Changes = dict[bytes, bytes | None]  # key -> new value, None: deleted


class StateProvider:
    """The interface every provider implements (see the module docstring)."""

    NAME = ""
    HOST_LOCAL: bool = False  # True: the data lives on this machine only (sqlite file, process memory)

    def load(self, namespace: str) -> tuple[dict[bytes, bytes], int]:
        """(committed pairs, last committed txid or 0); anything prepared but not committed is dropped."""
        raise NotImplementedError

    def prepare(self, namespace: str, txid: int, changes: Changes) -> None:
        raise NotImplementedError

    def commit(self, namespace: str, txid: int, changes: Changes) -> None:
        """Apply ``changes`` and set the txid, atomically; a ``txid`` not above the stored one
        changes nothing (only drops what was prepared). That is an old checkpoint run again:
        Spark recomputing a lost task from its lineage re-runs its past waves, and writing their
        older values would move the committed state back."""
        raise NotImplementedError

    def rollback(self, namespace: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Close connections (they reopen on next use)."""

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_c": None}  # `_c`: the open connection, if any (reopened on use)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)


# -- memory ---------------------------------------------------------------------------------

_MEMORY: dict[str, tuple[dict[bytes, bytes], int]] = {}  # namespace -> (committed, txid), this process
_MEMORY_LOCK = threading.Lock()


class MemoryProvider(StateProvider):
    """State in this process's memory (Storm's InMemoryKeyValueState): survives a topology being
    submitted again in the same process, not the process. For tests and small topologies."""

    NAME = "memory"
    HOST_LOCAL = True

    def __init__(self, config: dict | None = None):
        self.prepared: dict[str, tuple[int, Changes]] = {}

    def load(self, namespace: str) -> tuple[dict[bytes, bytes], int]:
        with _MEMORY_LOCK:
            self.prepared.pop(namespace, None)
            data, txid = _MEMORY.get(namespace, ({}, 0))
            return dict(data), txid

    def prepare(self, namespace: str, txid: int, changes: Changes) -> None:
        self.prepared[namespace] = (txid, dict(changes))

    def commit(self, namespace: str, txid: int, changes: Changes) -> None:
        with _MEMORY_LOCK:
            stored, stored_txid = _MEMORY.get(namespace, ({}, 0))
            self.prepared.pop(namespace, None)
            if stored_txid >= txid:  # an old checkpoint run again: see StateProvider
                return
            data = dict(stored)
            _apply(data, changes)
            _MEMORY[namespace] = (data, txid)

    def rollback(self, namespace: str) -> None:
        self.prepared.pop(namespace, None)


def _apply(data: dict[bytes, bytes], changes: Changes) -> None:
    for k, v in changes.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v


# -- SQL (sqlite and postgres share the tables and the statements' shape) ---------------------

class SqlProvider(StateProvider):
    """Three tables: committed pairs, the last committed txid per namespace, prepared changes.
    `commit` applies the changes, deletes the prepared rows and sets the txid in one transaction."""

    P = "?"  # the driver's placeholder

    def _conn(self) -> Any:
        raise NotImplementedError

    def _upsert(self, table: str, cols: str, conflict: str, update: str) -> str:
        ph = ", ".join([self.P] * len(cols.split(",")))
        return f"INSERT INTO {table} ({cols}) VALUES ({ph}) ON CONFLICT ({conflict}) DO UPDATE SET {update}"

    def load(self, namespace: str) -> tuple[dict[bytes, bytes], int]:
        p = self.P
        c = self._conn()
        with self._tx(c) as cur:
            cur.execute(f"DELETE FROM squall_state_prepared WHERE ns = {p}", (namespace,))
            cur.execute(f"SELECT k, v FROM squall_state WHERE ns = {p}", (namespace,))
            data = {bytes(k): bytes(v) for k, v in cur.fetchall()}
            txid = self._txid(cur, namespace)
        return data, txid

    def _txid(self, cur: Any, namespace: str) -> int:
        """The namespace's last committed txid (0: none), read in the caller's transaction."""
        cur.execute(f"SELECT txid FROM squall_state_txid WHERE ns = {self.P}", (namespace,))
        row = cur.fetchone()
        return int(row[0]) if row else 0

    def prepare(self, namespace: str, txid: int, changes: Changes) -> None:
        p = self.P
        c = self._conn()
        with self._tx(c) as cur:
            cur.execute(f"DELETE FROM squall_state_prepared WHERE ns = {p}", (namespace,))
            if changes:
                cur.executemany(
                    f"INSERT INTO squall_state_prepared (ns, txid, k, v) VALUES ({p}, {p}, {p}, {p})",
                    [(namespace, txid, k, v) for k, v in changes.items()])

    def commit(self, namespace: str, txid: int, changes: Changes) -> None:
        p = self.P
        c = self._conn()
        puts = [(namespace, k, v) for k, v in changes.items() if v is not None]
        dels = [(namespace, k) for k, v in changes.items() if v is None]
        with self._tx(c) as cur:
            if self._txid(cur, namespace) >= txid:  # an old checkpoint run again: see StateProvider
                cur.execute(f"DELETE FROM squall_state_prepared WHERE ns = {p}", (namespace,))
                return
            if puts:
                cur.executemany(self._upsert("squall_state", "ns, k, v", "ns, k", "v = excluded.v"), puts)
            if dels:
                cur.executemany(f"DELETE FROM squall_state WHERE ns = {p} AND k = {p}", dels)
            cur.execute(f"DELETE FROM squall_state_prepared WHERE ns = {p}", (namespace,))
            cur.execute(self._upsert("squall_state_txid", "ns, txid", "ns", "txid = excluded.txid"),
                        (namespace, txid))

    def rollback(self, namespace: str) -> None:
        c = self._conn()
        with self._tx(c) as cur:
            cur.execute(f"DELETE FROM squall_state_prepared WHERE ns = {self.P}", (namespace,))

    def _tx(self, c: Any) -> Any:
        raise NotImplementedError


_SQL_TABLES = (
    "CREATE TABLE IF NOT EXISTS squall_state (ns TEXT NOT NULL, k {blob} NOT NULL, v {blob} NOT NULL, "
    "PRIMARY KEY (ns, k))",
    "CREATE TABLE IF NOT EXISTS squall_state_txid (ns TEXT PRIMARY KEY, txid BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS squall_state_prepared (ns TEXT NOT NULL, txid BIGINT NOT NULL, k {blob} NOT NULL, "
    "v {blob})",
)


def default_sqlite_path() -> str:
    """$SQUALL_STATE_DIR, else $XDG_DATA_HOME/squall, else ~/.local/share/squall: state.sqlite there."""
    base = os.environ.get("SQUALL_STATE_DIR")
    if not base:
        xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        base = str(Path(xdg) / "squall")
    return str(Path(base) / "state.sqlite")


class _SqliteTx:
    def __init__(self, c: sqlite3.Connection):
        self.c = c

    def __enter__(self) -> sqlite3.Cursor:
        self.c.execute("BEGIN IMMEDIATE")
        self.cur = self.c.cursor()
        return self.cur

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is None:
            self.c.execute("COMMIT")
        else:
            self.c.execute("ROLLBACK")


SQLITE_BUSY_SECS = 60  # how long a connection waits for another's lock


def _to_wal(c: sqlite3.Connection) -> None:
    """Put the store in WAL mode. Tasks that open a new store at the same moment all switch it;
    the switch needs the whole file and SQLite does not wait for it as it waits for a write
    lock ("database is locked" at once), so it is retried until the other task is done."""
    deadline = time.monotonic() + SQLITE_BUSY_SECS
    while True:
        try:
            c.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class SqliteProvider(SqlProvider):
    """A SQLite file (WAL, synchronous=FULL: a commit survives a killed process and a power cut)."""

    NAME = "sqlite"
    HOST_LOCAL = True

    def __init__(self, config: dict | None = None):
        self.path = str((config or {}).get("path") or default_sqlite_path())
        self._c: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._c is None:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            c = sqlite3.connect(self.path, timeout=SQLITE_BUSY_SECS, isolation_level=None, check_same_thread=False)
            _to_wal(c)
            c.execute("PRAGMA synchronous=FULL")
            for ddl in _SQL_TABLES:
                c.execute(ddl.format(blob="BLOB"))
            self._c = c
        return self._c

    def _tx(self, c: sqlite3.Connection) -> _SqliteTx:
        return _SqliteTx(c)

    def close(self) -> None:
        if self._c is not None:
            self._c.close()
            self._c = None
