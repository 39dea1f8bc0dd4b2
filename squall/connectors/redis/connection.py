"""The Redis connection settings squall's Redis spouts share, and the small conversions of
redis-py's replies they need."""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import quote

from squall.connectors.settings import Secret, env_first


def redis_url(url: str | None = None, host: str | None = None, port: int | None = None,
              username: str | None = None, password: str | None = None, db: int | None = None) -> Secret:
    """The Redis URL from the arguments, else the environment, else the local default."""
    url = url or env_first("REDIS_URL")
    if url:
        return Secret(url)
    host = host or env_first("REDIS_HOST", default="127.0.0.1")
    port = int(port or env_first("REDIS_PORT", default="6379"))
    user = username or env_first("REDIS_USERNAME", "REDIS_USER", default="")
    pw = password or env_first("REDIS_PASSWORD", default="")
    db = int(db if db is not None else env_first("REDIS_DB", default="0"))
    auth = ""
    if pw:
        auth = f"{quote(user, safe='')}:{quote(pw, safe='')}@"
    elif user:
        auth = f"{quote(user, safe='')}@"
    return Secret(f"redis://{auth}{host}:{port}/{db}")


def as_text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def entry_id_key(eid: str) -> tuple[int, int]:
    ms, _, seq = eid.partition("-")
    return int(ms), int(seq or 0)


def close_quietly(r: Any) -> None:
    if r is not None:
        with contextlib.suppress(Exception):  # closing a broken connection may fail; nothing to do
            r.close()
