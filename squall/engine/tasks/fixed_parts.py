"""A bolt's fixed attributes (`fixed_attributes`): built once (in `prepare`, say), only read after.

On Spark a bolt task's instance is pickled for each snapshot (squall.engine.resident.snapshots),
and unpickled where it is restored. A lookup table or a model of a few MB would then cost more
than the bolt's own work. A fixed attribute is pickled once, written to a file of its own named by
its token (`FixedPart`), and unpickled once per process: each process keeps what it unpickled or
made, by token, for the run. An attribute reassigned (`self.table = new`) is seen (it is another
object) and carried anew. One changed in place breaks the contract: every
squall.fixed.check.waves waves of the task (more for big ones) the process holding it pickles it
again and compares (`Watch`). On a change the task reports it and carries the whole instance in
every snapshot from then on (engine/tasks/bolt_task.py).
"""

from __future__ import annotations

import hashlib
import pickle
import secrets
from typing import Any, NamedTuple


class FixedPart(NamedTuple):
    """A task's fixed attributes as carried: pickled once (`made`: the wave), with the token
    processes keep them by. `blob` None: they are in the snapshot file named by the token
    (squall.engine.resident.snapshots)."""

    token: int
    blob: bytes | None
    made: int


CHECK_BYTES = 1 << 20  # fixed attributes over this many bytes pickled are checked less often, in proportion


class Watch:
    """Fixed attributes held by this process, and what each pickled to when it got them, so a
    change in place is caught (the same objects in the same process pickle the same). A check
    pickles them again, so for every CHECK_BYTES they pickle to it comes `every` waves later:
    its cost per wave stays that of pickling 1 MB every `every` waves, whatever their size."""

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


def received(key: Any, part: FixedPart, wave: int, loads: Any, check: bool) -> Watch:
    """The fixed attributes of a snapshot (of `wave`): this process's own, or unpickled (once) and kept."""
    watch = _HELD.get(part.token)
    if watch is None:
        watch = Watch(loads(part.blob), wave, check)
        _hold(key, part.token, watch)
    return watch


def drop(key: Any) -> None:
    """A task that carries its instance whole from now on: its fixed attributes go."""
    token = _TOKEN_OF.pop(key, None)
    if token is not None:
        _HELD.pop(token, None)
