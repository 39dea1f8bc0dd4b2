"""A bolt's fixed attributes (`fixed_attributes`): built once (in `prepare`, say), only read after.

On Spark a bolt task's instance is pickled after every wave and unpickled when its next wave lands
on another Python worker (engine/spark/worker.py). A lookup table or a model of a few MB then costs
more than the bolt's own work. A fixed attribute is pickled once, travels on as those same bytes in
the task's State (`FixedPart`), and is unpickled once per process: each process keeps what it
unpickled or made, by token, for the run. An attribute reassigned (`self.table = new`) is seen (it is
another object) and carried anew. One changed in place breaks the contract: every `check_every`
waves of the task the process holding it pickles it again and compares (`Watch`). On a change the
task reports it and carries the whole instance every wave from then on.
"""

from __future__ import annotations

import hashlib
import pickle
import secrets
from typing import Any, NamedTuple


class FixedPart(NamedTuple):
    """A task's fixed attributes as carried: pickled once, with the token processes keep them by."""

    token: int
    blob: bytes


class Watch:
    """Fixed attributes held by this process, and what each pickled to when it got them, so a
    change in place is caught (the same objects in the same process pickle the same)."""

    __slots__ = ("objects", "digests", "checked")

    def __init__(self, objects: dict[str, Any], wave: int, check: bool = True):
        self.objects = objects
        self.digests = {n: digest(o) for n, o in objects.items()} if check else {}
        self.checked = wave

    def same_objects(self, objects: dict[str, Any]) -> bool:
        mine = self.objects
        return objects.keys() == mine.keys() and all(objects[n] is o for n, o in mine.items())

    def changed(self, wave: int, every: int) -> list[str]:
        """The names changed in place since this process got them, when a check is due."""
        if every <= 0 or wave - self.checked < every:
            return []
        self.checked = wave
        return [n for n, o in self.objects.items()
                if self.digests.get(n) is not None and digest(o) != self.digests[n]]


def digest(obj: Any) -> bytes | None:
    """A digest of the object's pickle; None when the standard pickle cannot take it (not checked)."""
    try:
        return hashlib.blake2b(pickle.dumps(obj, protocol=5), digest_size=16).digest()
    except Exception:  # noqa: BLE001 - a lambda, a local class: carried by cloudpickle, not checked
        return None


def fixed_names(instance: Any) -> tuple[str, ...]:
    """The attribute names the bolt's class declares fixed."""
    return tuple(getattr(type(instance), "fixed_attributes", ()) or ())


def user_instance(bolt: Any) -> Any:
    """The user's bolt inside squall's wrappers (a BasicBolt's executor, windowed and stateful
    executors): each wrapper names the attribute it keeps it in (`WRAPS`)."""
    while True:
        attr = getattr(type(bolt), "WRAPS", None)
        if attr is None:
            return bolt
        bolt = getattr(bolt, attr)


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
    return FixedPart(token, dumps(objects)), watch


def received(key: Any, part: FixedPart, wave: int, loads: Any, check: bool) -> Watch:
    """The fixed attributes of a State (of `wave`): this process's own, or unpickled (once) and kept."""
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
