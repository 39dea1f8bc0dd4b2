"""Reading the log a test's subprocess wrote, for its failure message."""

from __future__ import annotations

from pathlib import Path


def tail(path: Path, n: int = 40) -> str:
    """The last `n` lines of `path`, or "(no log)" when it cannot be read."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"
