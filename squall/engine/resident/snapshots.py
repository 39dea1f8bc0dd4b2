"""Snapshot files: each slot writes its tasks' state at a snapshot wave to one file under the
topology's snapshot directory (in `squall.checkpoint.dir`, which every host sees), and reads the
files of any slot when it restores tasks after a failure (docs/design.md). The driver hears only
the file's name and size. A bolt's fixed attributes (squall.engine.tasks.fixed_parts) are written once,
to a file of their own named by their token.

Files are written to a temporary name and renamed, so a reader never sees half a file. They are
not fsynced: they must outlive a process or a host, not the machine's storage.
"""

from __future__ import annotations

import os
import pickle
import secrets
import shutil
import socket
from dataclasses import dataclass, field

from squall.api.config import Config
from squall.engine.tasks.fixed_parts import FixedPart


@dataclass
class SnapshotFile:
    """One slot's tasks as of the end of wave `wave` (spout tasks: as of their pulls of it)."""

    wave: int
    bolts: dict[int, tuple[bytes, FixedPart | None]] = field(default_factory=dict)  # task -> BoltTask.snapshot
    # spout task -> (SpoutRunner.snapshot or None: it does not pickle, the wave of the verdicts it had applied)
    spouts: dict[int, tuple[bytes | None, int]] = field(default_factory=dict)
    ackers: dict[int, bytes] = field(default_factory=dict)  # partition -> the pickled AckerPartition


class SnapshotStore:
    """A topology's snapshot directory."""

    def __init__(self, directory: str):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    @classmethod
    def of(cls, conf: dict, uid: str) -> SnapshotStore:
        base = conf.get(Config.SQUALL_CHECKPOINT_DIR)
        if not base:
            raise ValueError(f"{Config.SQUALL_CHECKPOINT_DIR} is not set: the driver sets it before the slots load")
        return cls(os.path.join(_local_path(base), "snapshots", uid))

    def path(self, wave: int, slot: int) -> str:
        return os.path.join(self.directory, f"w{wave:010d}-s{slot}.snap")

    def write(self, wave: int, slot: int, snap: SnapshotFile) -> tuple[str, int]:
        path = self.path(wave, slot)
        data = pickle.dumps(snap, protocol=pickle.HIGHEST_PROTOCOL)
        _write(path, data)
        return path, len(data)

    def read(self, path: str) -> SnapshotFile:
        with open(path, "rb") as f:
            return pickle.load(f)  # noqa: S301 - written by this topology's own slots

    def write_probe(self) -> str:
        """A file only this topology's driver wrote: a slot that cannot read it is not looking at the
        same directory (squall.checkpoint.dir on a disk of its own host)."""
        token = secrets.token_hex(8)
        _write(os.path.join(self.directory, "probe"), token.encode())
        return token

    def check_probe(self, token: str) -> None:
        try:
            with open(os.path.join(self.directory, "probe"), "rb") as f:
                seen = f.read().decode()
        except OSError:
            seen = None
        if seen != token:
            raise RuntimeError(
                f"{Config.SQUALL_CHECKPOINT_DIR} {self.directory!r} is not the driver's directory on host "
                f"{socket.gethostname()}: the driver's probe file is not there. The slots write their snapshots "
                "there and restore each other's tasks from them: put it on storage every host mounts (NFS, say)")

    def write_fixed(self, token: int, blob: bytes) -> None:
        path = os.path.join(self.directory, f"fixed-{token:x}.bin")
        if not os.path.exists(path):
            _write(path, blob)

    def read_fixed(self, token: int) -> bytes:
        with open(os.path.join(self.directory, f"fixed-{token:x}.bin"), "rb") as f:
            return f.read()

    def drop_before(self, wave: int) -> None:
        """Remove the snapshot files of waves before `wave` (the driver, once a later one is confirmed)."""
        try:
            names = os.listdir(self.directory)
        except OSError:
            return
        for name in names:
            if name.startswith("w") and name.endswith(".snap") and int(name[1:11]) < wave:
                try:
                    os.unlink(os.path.join(self.directory, name))
                except OSError:
                    pass

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _local_path(base: str) -> str:
    """A checkpoint directory as a local path: `file:` URLs and plain paths (a shared mount)."""
    if base.startswith("file://"):
        return base[len("file://"):]
    if base.startswith("file:"):
        return base[len("file:"):]
    if "://" in base:
        raise ValueError(f"snapshots are written with the file system: {Config.SQUALL_CHECKPOINT_DIR} must be a "
                         f"directory every host mounts (squall.shared.paths), got {base!r}")
    return base


def _write(path: str, data: bytes) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
