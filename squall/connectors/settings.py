"""Connection settings and their secrets: where a connector's URL and password come from
(arguments first, then environment variables), and how they are kept out of every repr, log
line and error message.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit


class Secret:
    """A password or token: repr and str show `***`; `reveal()` gives the value to the client."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None):
        self._value = value

    def reveal(self) -> str | None:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "'***'" if self._value else "None"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def env_first(*names: str, default: str | None = None) -> str | None:
    """The first of these environment variables that is set and not empty."""
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return default


def redact_url(url: str | None) -> str:
    """The URL with its password (and any userinfo-only token) replaced by `***`."""
    if not url:
        return str(url)
    out = []
    for part in str(url).split(","):  # NATS takes comma-separated server lists
        try:
            u = urlsplit(part.strip())
        except ValueError:
            out.append("<unparseable url>")
            continue
        token_only = u.password is None and bool(u.username) and u.scheme.startswith(("nats", "tls", "ws"))
        if u.password is not None or token_only:
            host = u.hostname or ""
            if u.port:
                host = f"{host}:{u.port}"
            userinfo = "***" if token_only else f"{u.username or ''}:***"
            u = u._replace(netloc=f"{userinfo}@{host}")
        out.append(urlunsplit(u))
    return ",".join(out)


def url_password(url: str | None) -> str | None:
    """The URL's password, unquoted (None if it has none or does not parse)."""
    if not url:
        return None
    try:
        pw = urlsplit(url).password
    except ValueError:
        return None
    return unquote(pw) if pw else None


def url_with_password(url: str, password: str | None) -> str:
    """Set the URL's password (keeping its user), for a password given apart from the URL."""
    if not password:
        return url
    u = urlsplit(url)
    host = u.hostname or ""
    if u.port:
        host = f"{host}:{u.port}"
    user = quote(unquote(u.username or ""), safe="")
    return urlunsplit(u._replace(netloc=f"{user}:{quote(password, safe='')}@{host}"))


def scrub(text: Any, secrets: Iterable[Secret | str | None]) -> str:
    """`text` with every secret (and its URL-quoted form) replaced by `***`."""
    s = str(text)
    for sec in secrets:
        v = sec.reveal() if isinstance(sec, Secret) else sec
        if v:
            for form in {v, quote(v, safe=""), quote(v)}:
                s = s.replace(form, "***")
    return s


def describe_error(error: BaseException, secrets: Iterable[Secret | str | None] = ()) -> str:
    """"Type: text" of an exception, with every secret scrubbed: client libraries may echo the
    URL they were given, password included."""
    text = str(error)
    return scrub(f"{type(error).__name__}: {text}" if text else type(error).__name__, secrets)
