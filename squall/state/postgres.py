"""PostgreSQL state provider (psycopg 3): the SQL provider's tables in the database of `dsn`."""

from __future__ import annotations

from typing import Any

from squall.state.providers import _SQL_TABLES, SqlProvider


class PostgresProvider(SqlProvider):
    """State in PostgreSQL: shared by every host that reaches the database."""

    NAME = "postgres"
    HOST_LOCAL = False
    P = "%s"

    def __init__(self, config: dict | None = None):
        self.dsn = str((config or {}).get("dsn") or "")
        self._c: Any = None

    def _conn(self) -> Any:
        if self._c is None or self._c.closed:
            import psycopg  # noqa: PLC0415 - only needed with this provider

            c = psycopg.connect(self.dsn, autocommit=False)
            with c.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(7710433)")  # two tasks creating the tables at once
                for ddl in _SQL_TABLES:
                    cur.execute(ddl.format(blob="BYTEA"))
            c.commit()
            self._c = c
        return self._c

    def _tx(self, c: Any) -> Any:
        return _PgTx(c)

    def close(self) -> None:
        if self._c is not None:
            self._c.close()
            self._c = None


class _PgTx:
    def __init__(self, c: Any):
        self.c = c

    def __enter__(self) -> Any:
        self.cur = self.c.cursor()
        return self.cur

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self.cur.close()
        if exc_type is None:
            self.c.commit()
        else:
            self.c.rollback()
