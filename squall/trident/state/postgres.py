"""Map states in PostgreSQL (psycopg 3).

Same design as the SQLite store: a table per state (``k`` TEXT primary key, ``v`` the JSON
text), the ``MetaStore`` in table ``squall_meta`` of the same database (namespace: the state
table), a connection per state opened lazily (the factory pickles to Spark executors), a
batch written at commit in one transaction (``executemany`` of ``INSERT ... ON CONFLICT DO
UPDATE``, pipelined by psycopg) together with the meta writes that joined it.

The DSN defaults to ``$SQUALL_PG_DSN``, else to ``host/port/dbname/user`` from ``PGHOST``,
``PGPORT``, ``PGDATABASE``, ``PGUSER`` (defaults ``127.0.0.1``, ``5432``, ``test``,
``postgres``); a password is best left to ``PGPASSWORD`` or ``~/.pgpass``, which libpq reads
where the state runs. Passwords never appear in ``describe()``, ``repr()`` or our messages.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

from squall.trident.state.commit import BufferedBackingMap, MetaStoreBase
from squall.trident.state.interfaces import check_identifier, check_kind
from squall.trident.state.maps import BackingMapStateFactory
from squall.trident.state.values import value_codec

__all__ = ["PostgresMapState", "PostgresMetaStore", "PostgresStateFactory", "default_dsn", "redact_dsn"]

META_TABLE = "squall_meta"
_SCHEMA_LOCK = 0x5351_5541_4C4C  # pg_advisory_xact_lock key serialising CREATE TABLE IF NOT EXISTS
_DEFAULTS = {"host": "127.0.0.1", "port": "5432", "dbname": "test", "user": "postgres"}
_ENV = {"host": "PGHOST", "port": "PGPORT", "dbname": "PGDATABASE", "user": "PGUSER"}


def _psycopg():
    try:
        import psycopg
    except ImportError as e:  # pragma: no cover - the connectors extra is missing
        raise ImportError("the PostgreSQL state needs psycopg 3: pip install 'squall[connectors]'") from e
    return psycopg


def _quote_conninfo_value(v: str) -> str:
    if v and all(c.isalnum() or c in "._-/:" for c in v):
        return v
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def default_dsn() -> str:
    """``$SQUALL_PG_DSN``, else a DSN from the ``PG*`` variables and the defaults."""
    dsn = os.environ.get("SQUALL_PG_DSN")
    if dsn:
        return dsn
    parts = {k: os.environ.get(env) or _DEFAULTS[k] for k, env in _ENV.items()}
    return " ".join(f"{k}={_quote_conninfo_value(v)}" for k, v in parts.items())


def redact_dsn(dsn: str) -> str:
    """``dsn`` without its password (key=value or URI form)."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        params = conninfo_to_dict(dsn)
    except Exception:
        return "<unparsable dsn hidden>"
    if "password" in params:
        params["password"] = "***"
    return make_conninfo("", **params)


def _scope_name(dsn: str, table: str) -> str:
    # a digest, not the DSN: the scope name must not carry a password
    return f"postgres:{hashlib.sha256(dsn.encode()).hexdigest()[:16]}:{table}"


def _connect(dsn: str, table: str, connect_timeout: int):
    psycopg = _psycopg()
    from psycopg import sql

    conn = psycopg.connect(dsn, autocommit=True, connect_timeout=connect_timeout)
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            conn.execute(
                sql.SQL("CREATE TABLE IF NOT EXISTS {} (k TEXT PRIMARY KEY, v TEXT NOT NULL)").format(
                    sql.Identifier(table)
                )
            )
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} "
                    "(ns TEXT NOT NULL, k TEXT NOT NULL, v BYTEA NOT NULL, PRIMARY KEY (ns, k))"
                ).format(sql.Identifier(META_TABLE))
            )
    except BaseException:
        conn.close()
        raise
    return conn


def _upsert_meta(cur, ns: str, meta: dict[str, bytes]) -> None:
    from psycopg import sql

    cur.executemany(
        sql.SQL(
            "INSERT INTO {} (ns, k, v) VALUES (%s, %s, %s) ON CONFLICT (ns, k) DO UPDATE SET v = EXCLUDED.v"
        ).format(sql.Identifier(META_TABLE)),
        [(ns, k, v) for k, v in meta.items()],
    )


class PostgresMapState(BufferedBackingMap):
    """The PostgreSQL backing map of one state (one connection)."""

    def __init__(self, dsn: str, kind: str, table: str = "squall_state", connect_timeout: int = 10) -> None:
        self.dsn = dsn
        self.kind = check_kind(kind)
        self.table = check_identifier(table)
        self.connect_timeout = connect_timeout
        super().__init__(_scope_name(dsn, table), *value_codec(kind))
        self._conn_ = None

    @classmethod
    def factory(
        cls, dsn: str | None = None, kind: str = "opaque", table: str = "squall_state", connect_timeout: int = 10
    ) -> PostgresStateFactory:
        return PostgresStateFactory(dsn, kind, table, connect_timeout)

    @property
    def _conn(self):
        if self._conn_ is None or self._conn_.closed:
            self._conn_ = _connect(self.dsn, self.table, self.connect_timeout)
        return self._conn_

    def _read(self, enc_keys: list[str]) -> dict[str, Any]:
        from psycopg import sql

        q = sql.SQL("SELECT k, v FROM {} WHERE k = ANY(%s)").format(sql.Identifier(self.table))
        return dict(self._conn.execute(q, (enc_keys,)).fetchall())

    def _write_state_rows(self, cur, items: list[tuple[str, Any]]) -> None:
        from psycopg import sql

        cur.executemany(
            sql.SQL("INSERT INTO {} (k, v) VALUES (%s, %s) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v").format(
                sql.Identifier(self.table)
            ),
            items,
        )

    def _write_meta_rows(self, cur, meta: dict[str, bytes]) -> None:
        _upsert_meta(cur, self.table, meta)

    def _write(self, items: list[tuple[str, Any]], meta: dict[str, bytes]) -> None:
        conn = self._conn
        with conn.transaction(), conn.cursor() as cur:
            if items:
                self._write_state_rows(cur, items)
            if meta:
                self._write_meta_rows(cur, meta)

    def _close(self) -> None:
        if self._conn_ is not None:
            self._conn_.close()
            self._conn_ = None

    def meta_store(self) -> PostgresMetaStore:
        return PostgresMetaStore(self.dsn, self.table, self.connect_timeout)

    def __repr__(self) -> str:
        return f"PostgresMapState({redact_dsn(self.dsn)!r}, {self.kind!r}, table={self.table!r})"


class PostgresMetaStore(MetaStoreBase):
    """The coordinator's records in ``squall_meta`` (namespace: the state table)."""

    def __init__(self, dsn: str, table: str = "squall_state", connect_timeout: int = 10) -> None:
        super().__init__(_scope_name(dsn, table))
        self.dsn = dsn
        self.table = check_identifier(table)
        self.connect_timeout = connect_timeout
        self._conn_ = None

    @property
    def _conn(self):
        if self._conn_ is None or self._conn_.closed:
            self._conn_ = _connect(self.dsn, self.table, self.connect_timeout)
        return self._conn_

    def _get_now(self, key: str) -> bytes | None:
        from psycopg import sql

        row = self._conn.execute(
            sql.SQL("SELECT v FROM {} WHERE ns = %s AND k = %s").format(sql.Identifier(META_TABLE)), (self.table, key)
        ).fetchone()
        return None if row is None else bytes(row[0])

    def _put_now(self, items: dict[str, bytes]) -> None:
        conn = self._conn
        with conn.transaction(), conn.cursor() as cur:
            _upsert_meta(cur, self.table, items)

    def close(self) -> None:
        if self._conn_ is not None:
            self._conn_.close()
            self._conn_ = None

    def __repr__(self) -> str:
        return f"PostgresMetaStore({redact_dsn(self.dsn)!r}, table={self.table!r})"


@dataclass(frozen=True, repr=False)
class PostgresStateFactory(BackingMapStateFactory):
    """Picklable configuration of PostgreSQL map states; ``dsn=None`` takes ``default_dsn()``
    (resolved when the factory is made, on the driver)."""

    dsn: str | None = None
    kind: str = "opaque"
    table: str = "squall_state"
    connect_timeout: int = field(default=10)

    def __post_init__(self) -> None:
        check_kind(self.kind)
        check_identifier(self.table)
        if self.dsn is None:
            object.__setattr__(self, "dsn", default_dsn())

    def make_backing(self, conf: dict, partition_index: int, num_partitions: int) -> PostgresMapState:
        return PostgresMapState(self.dsn, self.kind, self.table, self.connect_timeout)

    def meta_store(self, conf: dict | None = None) -> PostgresMetaStore:
        return PostgresMetaStore(self.dsn, self.table, self.connect_timeout)

    def describe(self) -> str:
        return f"postgres {self.kind} map state ({redact_dsn(self.dsn)}, table {self.table})"

    def __repr__(self) -> str:
        return f"PostgresStateFactory({redact_dsn(self.dsn)!r}, {self.kind!r}, table={self.table!r})"

    def drop(self) -> None:
        """Deletes the state table and this table's meta records."""
        from psycopg import sql

        conn = _connect(self.dsn, self.table, self.connect_timeout)
        try:
            with conn.transaction():
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(self.table)))
                conn.execute(sql.SQL("DELETE FROM {} WHERE ns = %s").format(sql.Identifier(META_TABLE)), (self.table,))
        finally:
            conn.close()
