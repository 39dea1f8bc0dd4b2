"""A task's declared output streams (`StreamOut`: fields and routes) and the checks every
collector makes of an emit: the stream is declared, the values are a list of the right length."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Route = Callable[[Sequence[Any]], list[int]]  # values -> target task ids


class UndeclaredStreamError(ValueError):
    pass


class TaskIds(list):
    """The task ids an emit went to, as Storm's `emit` returns them: a list, read-only so that
    every emit to the same task returns the same one (a list made per emit would be a visible
    share of a bolt's time). `list(ids)` is a copy to change."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("the task ids emit() returns are read-only (shared by every emit to those tasks); "
                        "change a copy: list(ids)")

    append = extend = insert = pop = remove = clear = sort = reverse = _read_only
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only

    def __reduce__(self) -> tuple:
        return (TaskIds, (list(self),))


NO_TASKS = TaskIds()  # an emit nobody receives


class StreamOut:
    """One declared output stream of a task: its fields and where its tuples go."""

    __slots__ = ("component", "stream", "fields", "nfields", "direct", "routes", "route", "direct_tasks", "index",
                 "unrouted", "pick", "pick_tasks", "pick_ids", "pick_cache", "pick_index", "bucket")

    def __init__(self, component: str, stream: str, fields: tuple[str, ...], direct: bool,
                 routes: list[tuple[str, Route | None]], direct_tasks: set[int], index: int):
        self.component = component
        self.stream = stream
        self.fields = fields
        self.nfields = len(fields)
        self.direct = direct
        self.routes = routes
        self.direct_tasks = direct_tasks
        self.index = index
        self.unrouted = not routes  # nobody subscribes: an emit here makes no child
        fns = [r for _, r in routes if r is not None]
        if not fns:
            self.route = _no_targets
        elif len(fns) == 1:
            self.route = fns[0]
        else:
            self.route = lambda values: [t for fn in fns for t in fn(values)]
        # one subscriber whose route always picks one task: emits here may take the lean path
        one = fns[0] if len(routes) == 1 and len(fns) == 1 else None
        self.pick = getattr(one, "pick", None)  # values -> position in pick_tasks
        self.pick_tasks: list[int] = list(getattr(one, "tasks", None) or ()) if self.pick is not None else []
        self.pick_ids = [TaskIds((t,)) for t in self.pick_tasks]  # what an emit to each returns
        self.pick_cache: dict | None = getattr(one, "cache", None)  # a fields route's positions by (str) value
        self.pick_index: int = getattr(one, "index", -1)  # ... of this field
        self.bucket = -1  # the first lean bucket of this stream (its collector numbers them), or -2: dropped


def _no_targets(values: Sequence[Any]) -> list[int]:
    return []


def bad_stream(component: str, stream: str, streams: dict[str, StreamOut]) -> UndeclaredStreamError:
    return UndeclaredStreamError(
        f"component {component!r} emitted on stream {stream!r}, which it does not declare; declared streams: "
        f"{sorted(streams)}. Declare it in declare_output_fields: declarer.declare([...], stream={stream!r})"
    )


def bad_arity(so: StreamOut, values: Sequence[Any]) -> ValueError:
    return ValueError(
        f"component {so.component!r} emitted {len(values)} value(s) {list(values)!r} on stream {so.stream!r}, "
        f"which declares {so.nfields} field(s) {list(so.fields)}"
    )


def check_values(values: Any, component: str) -> list:
    if type(values) is list:
        return values
    if isinstance(values, (tuple, list)):
        return list(values)
    raise TypeError(
        f"component {component!r} emitted {values!r}: values must be a list (one entry per declared field)"
    )


def checked_emit(so: StreamOut | None, values: Any, streams: dict[str, StreamOut], component: str, stream: str,
                 who: str = "component", direct: bool = False) -> list:
    """An emit's values normalized, or the error that says precisely what is wrong: the stream
    is not declared, the values are not a list of the declared length, or (`emit`, not
    `emit_direct`: `direct` False) the stream is direct."""
    if so is None:
        raise bad_stream(component, stream, streams)
    values = check_values(values, component)
    if len(values) != so.nfields:
        raise bad_arity(so, values)
    if so.direct and not direct:
        raise ValueError(f"{who} {component!r}: stream {stream!r} is declared direct; use emit_direct(task, ...)")
    return values
