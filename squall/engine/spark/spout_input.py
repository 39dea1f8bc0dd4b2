"""How a wave's spout output reaches the tasks of level 1.

It used to travel in stage 1's closure. A closure over ~1 MB is cloudpickled, then pickled
again into a broadcast file, and every task of the stage reads and unpickles all of it: with
the Kafka column spout's ~75,000-row waves that was 80% of the driver's time building a wave
(134 of 175 py-spy samples under `submit_wave`), and each task read the other tasks' input too.

On a `local[...]` master the tasks run on the driver's host, so each partition's input is
pickled once into its own file and the closure carries the paths: a task reads only its own. The
files go to /dev/shm when there is one: on disk, once ~100 MB were written the kernel's
writeback throttled each 16 MB write from 4 ms to 32 ms. A driver killed before it removes
its directory leaves it behind; the next one on the host removes it (its name holds the pid).
On any other master (executors in JVMs of their own, on this host or others) the input stays
in the closure.

A level-1 task may run again later, long after its wave: Spark rebuilds a lost cached partition
from its lineage, which reaches back to the last checkpoint. So a wave's files stay until a
wave built after them has its checkpoint written (`cut`), and a wave is checkpointed early when
the files held since the last checkpoint pass MAX_HELD_BYTES.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any

from squall.engine.spark.host_local import tasks_in_driver_jvm

log = logging.getLogger("squall")

SHM = "/dev/shm"
DIR_PREFIX = "squall-spout-"
MAX_HELD_BYTES = 256 << 20  # spout input in files since the last checkpointed build: checkpoint early past this

Carried = dict[int, "bytes | str"]  # level-1 partition -> its pickled records, or the file that holds them


class SpoutInputs:
    """The driver's side: packs a build's per-partition input and removes it when unreachable."""

    def __init__(self, master: str, parent_dir: str | None = None):
        self.dir = None
        if tasks_in_driver_jvm(master):
            parent = parent_dir or (SHM if os.access(SHM, os.W_OK) else None)
            remove_orphans(parent or tempfile.gettempdir())
            self.dir = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=parent)
        self._held: list[tuple[int, list[str]]] = []  # (build, its files), oldest first
        self.bytes_since_checkpoint = 0
        self.cut_at = 0  # the last build whose checkpoint was written (its files and older are gone)

    def carry(self, build: int, parts: dict[int, list]) -> Carried:
        """What stage 1's closure holds for build `build`: each partition's records pickled, or
        the file they are pickled into (written as they are pickled: no copy in memory). A file
        that cannot be written (the disk is full) leaves its records in the closure."""
        out: Carried = {}
        paths = []
        for p, recs in parts.items():
            if self.dir is not None:
                path = os.path.join(self.dir, f"{build}-{p}")
                try:
                    with open(path, "wb") as f:
                        pickle.dump(recs, f, protocol=pickle.HIGHEST_PROTOCOL)
                        self.bytes_since_checkpoint += f.tell()
                    out[p] = path
                    paths.append(path)
                    continue
                except OSError as e:
                    _unlink(path)
                    log.warning("spout input of wave build %d goes in the closure: %s could not be written (%s)",
                                build, path, e)
            out[p] = pickle.dumps(recs, protocol=pickle.HIGHEST_PROTOCOL)
        if paths:
            self._held.append((build, paths))
        return out

    def checkpointing(self) -> None:
        """This build is checkpointed: count the bytes held from here."""
        self.bytes_since_checkpoint = 0

    def cut(self, build: int) -> None:
        """Build `build`'s checkpoint is written: no task of it, or of any build before, runs again."""
        self.cut_at = max(self.cut_at, build)
        while self._held and self._held[0][0] <= build:
            for path in self._held.pop(0)[1]:
                _unlink(path)

    @property
    def held_builds(self) -> list[int]:
        return [b for b, _ in self._held]

    def close(self) -> None:
        self._held = []
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def remove_orphans(parent: str) -> None:
    """Remove the spout input directories of drivers that are gone (killed before they could)."""
    for d in Path(parent).glob(f"{DIR_PREFIX}*-*"):
        pid = d.name[len(DIR_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def records_for(carried: Carried | None, p: int) -> list[Any]:
    """The worker's side: level-1 partition `p`'s records of this wave's spout output."""
    if not carried or p not in carried:
        return []
    got = carried[p]
    if isinstance(got, bytes):
        return pickle.loads(got)
    try:
        with open(got, "rb") as f:
            return pickle.load(f)  # its batches' bytes read straight into place
    except FileNotFoundError:
        raise RuntimeError(f"squall: the spout input file {got} is gone: a task of a wave whose input was "
                           "already released ran again (the wave is failed and its tuples replayed)") from None
