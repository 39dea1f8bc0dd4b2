"""A bolt's fixed attributes (`fixed_attributes`): built once (in `prepare`, say), only read after.

On Spark a bolt task's instance is pickled after every wave and unpickled when its next wave lands
on another Python worker (engine/spark/worker.py). A lookup table or a model of a few MB then costs
more than the bolt's own work. A fixed attribute is pickled once, travels on as those same bytes in
the task's State (`FixedPart`), or on a local master in a file the State names (`spill`), and is
unpickled once per process: each process keeps what it unpickled or made, by token, for the run.
An attribute reassigned (`self.table = new`) is seen (it is another object) and carried anew. One
changed in place breaks the contract: every squall.fixed.check.waves waves of the task (more for
big ones) the process holding it pickles it again and compares (`Watch`). On a change the task
reports it and carries the whole instance every wave from then on (engine/bolt_task.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import secrets
from typing import Any, NamedTuple

FIXED_DIR = "squall.engine.fixed.dir"  # set by the Spark engine on a local master (engine/spark/fixed_files.py)
SPILL_AFTER_WAVES = 3  # a token this many waves old goes to a file there, and States carry it no more


class FixedPart(NamedTuple):
    """A task's fixed attributes as carried: pickled once (`made`: the wave), with the token
    processes keep them by. `blob` None: they are in the file named by the token (`spill`)."""

    token: int
    blob: bytes | None
    made: int


CHECK_BYTES = 1 << 20  # fixed attributes over this many bytes pickled are checked less often, in proportion


class Watch:
    """Fixed attributes held by this process, and what each pickled to when it got them, so a
    change in place is caught (the same objects in the same process pickle the same). A check
    pickles them again, so for every CHECK_BYTES they pickle to it comes `every` waves later:
    its cost per wave stays that of pickling 1 MB every `every` waves (~1 ms a wave at 25)."""

    __slots__ = ("objects", "digests", "checked", "size")

    def __init__(self, objects: dict[str, Any], wave: int, check: bool = True):
        self.objects = objects
        self.digests: dict[str, bytes | None] = {}
        self.size = 0
        if check:
            for name, obj in objects.items():
                self.digests[name], size = _digest(obj)
                self.size += size
        self.checked = wave

    def same_objects(self, objects: dict[str, Any]) -> bool:
        mine = self.objects
        return objects.keys() == mine.keys() and all(objects[n] is o for n, o in mine.items())

    def changed(self, wave: int, every: int) -> list[str]:
        """The names changed in place since this process got them, when a check is due."""
        if every <= 0 or wave - self.checked < every * max(1, self.size // CHECK_BYTES):
            return []
        self.checked = wave
        return [n for n, o in self.objects.items()
                if self.digests.get(n) is not None and _digest(o)[0] != self.digests[n]]


def _digest(obj: Any) -> tuple[bytes | None, int]:
    """A digest of the object's pickle, and its size; None when the standard pickle cannot take it
    (then it is not checked)."""
    try:
        data = pickle.dumps(obj, protocol=5)
    except Exception:  # noqa: BLE001 - a lambda, a local class: carried by cloudpickle, not checked
        return None, 0
    return hashlib.blake2b(data, digest_size=16).digest(), len(data)


def fixed_names(instance: Any) -> tuple[str, ...]:
    """The attribute names the bolt's class declares fixed."""
    return tuple(getattr(type(instance), "fixed_attributes", ()) or ())


# This process's fixed attributes by token, and each task's current token (a task that carries new
# ones lets its old ones go). A process holds one set per task it has run.
_HELD: dict[int, Watch] = {}
_TOKEN_OF: dict[Any, int] = {}


def _hold(key: Any, token: int, watch: Watch) -> None:
    old = _TOKEN_OF.get(key)
    if old is not None and old != token:
        _HELD.pop(old, None)
    _TOKEN_OF[key] = token
    _HELD[token] = watch


def made(key: Any, objects: dict[str, Any], wave: int, dumps: Any, check: bool,
         watch: Watch | None = None) -> tuple[FixedPart, Watch]:
    """Fixed attributes carried anew: pickled here, once (`watch`: this process's, if it has one)."""
    token = secrets.randbits(63) or 1
    if watch is None or not watch.same_objects(objects):
        watch = Watch(objects, wave, check)
    _hold(key, token, watch)
    return FixedPart(token, dumps(objects), wave), watch


def spill(part: FixedPart, directory: str, wave: int) -> FixedPart:
    """On a local master, once a token is SPILL_AFTER_WAVES waves old: its bytes go to a file in
    `directory` (every Python worker is on this host) and the task's States carry only the token,
    so they no longer copy it through the JVM every wave. A token reassigned every wave or two
    never gets a file. The driver removes the file once no task that could run again reads it."""
    if part.blob is None or wave - part.made < SPILL_AFTER_WAVES:
        return part
    path = os.path.join(directory, str(part.token))
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                f.write(part.blob)
            os.replace(tmp, path)  # whole or not at all: another worker may write the same token
        except OSError:  # a full disk: the bytes stay in the State
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return part
    return FixedPart(part.token, None, part.made)


def received(key: Any, part: FixedPart, wave: int, loads: Any, check: bool, directory: str | None) -> Watch:
    """The fixed attributes of a State (of `wave`): this process's own, or unpickled (once) and kept."""
    watch = _HELD.get(part.token)
    if watch is None:
        watch = Watch(loads(part.blob if part.blob is not None else _read(directory, part.token)), wave, check)
        _hold(key, part.token, watch)
    return watch


def _read(directory: str | None, token: int) -> bytes:
    path = os.path.join(directory or "", str(token))
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise RuntimeError(f"squall: the fixed attributes file {path} is gone: a task of a wave whose States "
                           "were already released ran again (the wave is failed and its tuples replayed)") from None


def drop(key: Any) -> None:
    """A task that carries its instance whole from now on: its fixed attributes go."""
    token = _TOKEN_OF.pop(key, None)
    if token is not None:
        _HELD.pop(token, None)
