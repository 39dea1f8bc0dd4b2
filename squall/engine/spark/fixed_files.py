"""The driver's side of fixed attributes kept in files (engine/fixed_parts.spill), on a local master.

A task's States name its fixed attributes by token once their bytes are in a file, and a task
that runs again (Spark rebuilding a lost cached block from lineage, back to the last checkpoint)
reads the file of the token its State names. A token's file therefore stays while a task that can
still run may read it: until the task has moved to another token (it assigned a new object) at a
build whose checkpoint is written, as a build's spout input files do (engine/spark/spout_input.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

from squall.engine.spark.spout_input import DIR_PREFIX


class FixedFiles:
    """Which token each task's kept State names, and the files of tokens left behind."""

    def __init__(self, parent: str | None):
        """Files go to a directory of their own in `parent` (None: no files, the bytes stay in the
        States), named as the spout input's are, so a killed driver's is removed the same way."""
        self.dir = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-fixed-", dir=parent) if parent else None
        self._now: dict[tuple[str, int], int] = {}  # (component, task) -> its token in the last kept wave
        self._left: list[tuple[int, int]] = []  # (build at which the task had moved on, old token), oldest first

    def reported(self, build: int, component: str, task: int, token: int) -> None:
        """A kept wave's step of a task whose State names `token` (0: no fixed attributes)."""
        old = self._now.get((component, task), 0)
        if token != old:
            self._now[(component, task)] = token
            if old:
                self._left.append((build, old))

    def cut(self, build: int) -> None:
        """Build `build`'s checkpoint is written: no task of it, or of any build before, runs again."""
        if self.dir is None:
            self._left.clear()
            return
        while self._left and self._left[0][0] <= build:
            token = self._left.pop(0)[1]
            if token not in self._now.values():  # a State rebuilt from an older one names it again
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.dir, str(token)))

    def files(self) -> list[str]:
        return sorted(os.listdir(self.dir)) if self.dir is not None else []

    def close(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
