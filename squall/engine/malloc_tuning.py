"""glibc's malloc, tuned for waves: a wave allocates and frees arrays of megabytes (a batch's
roots, edge values, hashes and row indices), and with glibc's defaults most of them come back
from the kernel as fresh pages every wave.

glibc serves a block above its mmap threshold with a new mapping and unmaps it on free. It
raises that threshold to the size of a freed block (up to 32 MB), but it also gives the top of
the heap back to the kernel once more than twice that is free, and a wave's end frees more at
once. Each wave then faults its memory in again, page by page, zeroed by the kernel, and how
often depends on how glibc's own thresholds happen to move, so the same code would run at
different speeds from run to run.

So every squall process (the driver and each Spark Python worker) fixes the thresholds once: a
block below 32 MB comes from the heap, and up to 128 MB of free heap is kept for the next wave
instead of being returned. `squall.malloc.tune: False` in the topology conf leaves malloc alone,
as does a process whose malloc was set through the environment (MALLOC_*_ or GLIBC_TUNABLES).
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's own ceiling for the threshold it moves by itself
TRIM_THRESHOLD = 128 << 20
_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
_tuned: bool | None = None  # None: not tried yet in this process


def tune_malloc(conf: dict | None = None) -> bool:
    """Once per process (the first call decides): fix glibc's mmap and trim thresholds (see
    above). Whether this process is tuned; False where malloc is not glibc's, or the conf or the
    environment says otherwise."""
    global _tuned
    if _tuned is not None:
        return _tuned
    _tuned = False
    if conf is not None and not conf.get("squall.malloc.tune", True):
        return False
    if any(k in os.environ for k in _ENV) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return False  # the user's own settings
    if not _is_glibc():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    # the mmap threshold first: setting either stops glibc moving both by itself
    _tuned = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _tuned


def _is_glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # not a GNU libc (musl, macOS, Windows)
        return False
