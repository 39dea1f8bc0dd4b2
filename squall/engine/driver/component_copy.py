"""Refuse, at submit, a component that cannot be copied to its tasks, naming what stops it.

Every task runs a copy of the instance given to set_spout/set_bolt: spouts are deep-copied on
the driver (both engines); bolts are deep-copied by the local engine, and on Spark pickled with
pyspark's cloudpickle to reach the executors, where each task deep-copies it. A lock, a
connection or a generator made in `__init__` would otherwise fail deep in the engine with a bare
`TypeError: cannot pickle ...` that names neither the component nor the fix. Each component is
tried the way its engine really copies it, so nothing that runs today is refused; only when that
fails is the instance searched, a few levels down, for the attribute that cannot be copied.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable, Iterator
from typing import Any

from squall.api.components import InvalidTopologyException
from squall.api.topology import StormTopology

Copy = Callable[[Any], Any]
# Copied whole or not at all: a module that cannot be copied is the culprit, not what it imports.
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)

SEARCH_DEPTH = 4  # how far below an attribute the culprit is looked for (self.a.b.c.d)
SEARCH_ITEMS = 200  # items of one container tried before giving up on it


def _pickle_then_deepcopy(obj: Any) -> Any:
    """What a Spark bolt goes through: cloudpickle on the driver, a deep copy per task on the
    executor (of the unpickled instance; the original deep-copies the same)."""
    from pyspark import cloudpickle  # noqa: PLC0415 - only the Spark engine needs pyspark

    cloudpickle.dumps(obj)
    return copy.deepcopy(obj)


def copier(engine: str, is_spout: bool) -> tuple[Copy, str]:
    """How `engine` copies a component to its tasks, and those words for the error message."""
    if is_spout:
        return copy.deepcopy, "spouts run on the driver, each task on a deep copy (copy.deepcopy)"
    if engine == "local":
        return copy.deepcopy, "the local engine gives each task a deep copy (copy.deepcopy)"
    return _pickle_then_deepcopy, ("the Spark engine pickles each bolt (pyspark's cloudpickle) to its executors, "
                                   "where each task gets a deep copy")


def check_components_copy(topology: StormTopology, engine: str) -> None:
    """InvalidTopologyException for the first component its engine cannot copy to its tasks."""
    for cid, spec in topology.specs.items():
        if spec.obj is None:
            continue
        copy_fn, how = copier(engine, spec.is_spout)
        try:
            copy_fn(spec.obj)
        except Exception as e:  # noqa: BLE001 - any failure to copy is the user's to fix
            raise InvalidTopologyException(refusal(cid, spec.is_spout, spec.obj, copy_fn, how, e)) from e


def refusal(cid: str, is_spout: bool, obj: Any, copy_fn: Copy, how: str, error: BaseException) -> str:
    """The message: the component, the attribute and its type, the copy's error, the fix."""
    kind, hook = ("spout", "open()") if is_spout else ("bolt", "prepare()")
    found = find_uncopyable(obj, copy_fn)
    if found is not None:
        path, value, error = found
        what = f"its attribute {path} holds a {type_name(value)}, which cannot be copied"
        fix = f"Create it in {hook} instead of __init__"
    else:
        what = f"its {type_name(obj)} instance cannot be copied"
        fix = f"Make what it holds copyable, or create it in {hook} instead of __init__"
    return (f"{kind} {cid!r} cannot be copied to its tasks: {what} ({type(error).__name__}: {error}); {how}. "
            f"{fix}, or leave it out of the copy with __getstate__.")


def type_name(value: Any) -> str:
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def find_uncopyable(obj: Any, copy_fn: Copy, path: str = "self", depth: int = SEARCH_DEPTH,
                    seen: set[int] | None = None) -> tuple[str, Any, BaseException] | None:
    """The deepest part of `obj` that `copy_fn` fails on: (path, value, error), or None when
    no single part fails (the object itself cannot be copied)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return None
    seen.add(id(obj))
    for sub, value in _parts(obj, path):
        try:
            copy_fn(value)
        except Exception as e:  # noqa: BLE001 - this part is a culprit; look for a deeper one
            deeper = find_uncopyable(value, copy_fn, sub, depth - 1, seen) if depth > 0 else None
            return deeper or (sub, value, e)
    return None


def _parts(obj: Any, path: str) -> Iterator[tuple[str, Any]]:
    """What copying `obj` copies: a container's items, or an object's pickled state (its
    __getstate__, by default its __dict__ and __slots__), each with its path."""
    if isinstance(obj, dict):
        for i, (k, v) in enumerate(obj.items()):
            if i == SEARCH_ITEMS:
                return
            yield f"{path}[{k!r}]", v
        return
    if isinstance(obj, (list, tuple, set, frozenset)):
        for i, v in enumerate(obj):
            if i == SEARCH_ITEMS:
                return
            yield f"{path}[{i}]", v
        return
    if isinstance(obj, _OPAQUE) or not hasattr(obj, "__dict__") and not hasattr(type(obj), "__slots__"):
        return
    try:
        state = obj.__getstate__()
    except Exception:  # noqa: BLE001 - no state to search: the object itself is the culprit
        return
    parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
    for part in parts:
        if isinstance(part, dict):
            for name, value in part.items():
                yield f"{path}.{name}", value
