"""The spout's collector (Storm's SpoutOutputCollector): it validates and records each emit;
the spout task turns a wave's records into root trees and batches (squall.engine.tasks.spout_task)."""

from __future__ import annotations

from typing import Any

from squall.api.rebinding import current_collector
from squall.api.streams import StreamOut, checked_emit
from squall.reliability.roots import SharedRoot

_UNSET = object()


class SpoutOutputCollector:
    """A spout's collector (Storm's SpoutOutputCollector).

    As a bolt's (squall.api.collectors.OutputCollector), it records the common emit on a lean
    path: on a stream with one route that picks one task, with a msg id of its own or none,
    nothing recorded on the general path yet this wave: the target's bucket gets the values (a
    one-field stream's flat), `_lean_keys` the bucket and `_lean_mids` the msg id. Any other
    emit takes the general path, a record each (`take_recorded`), the lean ones made general
    first, so the emit order is kept."""

    __slots__ = ("_component", "_streams", "_emits", "_runner", "_columns", "_column_rows", "_buckets",
                 "_lean_keys", "_lean_vals", "_lean_mids")

    def __init__(self, component: str, streams: dict[str, StreamOut], runner: Any, lean: bool = True):
        self._component = component
        self._streams = streams
        self._emits: list[tuple] = []  # (stream out, values, msg id, targets)
        self._runner = runner
        self._columns: list[tuple] = []  # (stream out, RecordBatch, msg ids per row or None, one msg id or None)
        self._column_rows = 0
        self._buckets: list[tuple[StreamOut, int]] = []  # lean bucket -> (stream out, target task id)
        for so in sorted(streams.values(), key=lambda so: so.index):
            if so.pick is not None and lean:
                so.bucket = len(self._buckets)
                self._buckets.extend((so, t) for t in so.pick_tasks)
        self._lean_keys: list[int] = []
        self._lean_vals: list[list] = [[] for _ in self._buckets]
        self._lean_mids: list = []

    def __reduce__(self) -> tuple:
        # A spout instance carried in a snapshot keeps its collector as "the collector of the
        # task being restored" (squall.api.rebinding), not as a copy of this one.
        return (current_collector, ())

    @property
    def recorded_count(self) -> int:
        """Emits (rows) recorded since they were last taken (the coordinator's per-wave budget counts them)."""
        return len(self._emits) + len(self._lean_keys) + self._column_rows

    def take_lean(self) -> tuple[list[int], list[list], list[tuple[StreamOut, int]], list] | None:
        """Hand over (and forget) the lean path's records: (bucket per emit, values per bucket,
        the buckets' (stream out, task), msg id per emit); None when there are none."""
        if not self._lean_keys:
            return None
        got = (self._lean_keys, self._lean_vals, self._buckets, self._lean_mids)
        self._lean_keys, self._lean_vals, self._lean_mids = [], [[] for _ in self._buckets], []
        return got

    def _lean_to_general(self) -> None:
        """The lean records so far, as general ones (an emit that needs the general path comes next)."""
        lean = self.take_lean()
        if lean is not None:
            self.as_general(lean)

    def as_general(self, lean: tuple) -> None:
        """Records `take_lean` handed over, recorded again on the general path, in emit order."""
        keys, vals, buckets, mids = lean
        nexts = [iter(v).__next__ for v in vals]
        for b, m in zip(keys, mids):
            so, task = buckets[b]
            values = nexts[b]()
            self._emits.append((so, [values] if so.nfields == 1 else values, m, [task]))

    def take_columns(self) -> list[tuple]:
        """Hand over (and forget) the recorded column emits (squall.columnar.spout turns them into trees)."""
        cols, self._columns, self._column_rows = self._columns, [], 0
        return cols

    def take_recorded(self) -> list[tuple]:
        """Hand over (and forget) the general path's emits: (stream out, values, msg id, targets)."""
        emits, self._emits = self._emits, []
        return emits

    def emit(self, values: list, msg_id: Any = None, stream: str = "default") -> list[int]:
        so = self._streams.get(stream)
        if so is not None and type(values) is list and len(values) == (nf := so.nfields) and so.bucket >= 0 \
                and not self._emits and type(msg_id) is not SharedRoot:  # the lean path
            cache = so.pick_cache  # a fields grouping's positions by value, looked up here
            v = values[so.pick_index] if cache is not None else None
            p = cache.get(v) if type(v) is str else None
            if p is None:
                p = so.pick(values)
            b = so.bucket + p
            self._lean_keys.append(b)
            self._lean_vals[b].append(values[0] if nf == 1 else values)
            self._lean_mids.append(msg_id)
            return so.pick_ids[p]
        values = checked_emit(so, values, self._streams, self._component, stream, who="spout")
        if self._lean_keys:
            self._lean_to_general()
        targets = so.route(values)
        self._emits.append((so, values, msg_id, targets))
        return targets

    def emit_direct(self, task: int, values: list, msg_id: Any = None, stream: str = "default") -> None:
        so = self._streams.get(stream)
        values = checked_emit(so, values, self._streams, self._component, stream, who="spout", direct=True)
        if not so.direct or task not in so.direct_tasks:
            raise ValueError(
                f"spout {self._component!r}: emit_direct(task={task}) on stream {stream!r} needs a direct stream "
                f"with a direct subscriber on that task; subscribed tasks: {sorted(so.direct_tasks)}"
            )
        if self._lean_keys:
            self._lean_to_general()
        self._emits.append((so, values, msg_id, [task]))

    def emit_batch(self, data: Any, *args: Any, msg_id: Any = _UNSET, msg_ids: Any = None,
                   stream: str = "default") -> None:
        """Emit many tuples at once, in one of two forms:

        - `emit_batch(rows, msg_id, stream="default")`: rows (lists of values) as ONE tree:
          `ack(msg_id)` once all are processed, `fail` if any fails (Trident emits this way);
        - `emit_batch(columns, msg_ids=None, stream="default")`: columns (a pyarrow.RecordBatch,
          Table or dict of arrays) with one tracked tuple per row when `msg_ids` is given
          (`msg_ids[i]` for row i), untracked otherwise; no Python object is made per row.
        Either form takes `msg_id=` (one tree for all rows) or `msg_ids=` (one per row), not both.
        """
        columnar = isinstance(data, dict) or hasattr(data, "num_rows")
        if len(args) > 2:
            raise TypeError(f"spout {self._component!r}: emit_batch takes (data, msg_id(s), stream), got "
                            f"{len(args) + 1} positional arguments")
        if len(args) == 2:
            stream = args[1]
        if args:
            if columnar:
                if msg_ids is not None:
                    raise TypeError(f"spout {self._component!r}: emit_batch got msg_ids twice")
                msg_ids = args[0]
            else:
                if msg_id is not _UNSET:
                    raise TypeError(f"spout {self._component!r}: emit_batch got msg_id twice")
                msg_id = args[0]
        if msg_id is not _UNSET and msg_ids is not None:
            raise ValueError(f"spout {self._component!r}: emit_batch got both msg_id (one tree for all rows) and "
                             "msg_ids (one tree per row); give one of them")
        if columnar:
            self._emit_columns(data, msg_id, msg_ids, stream)
        elif msg_ids is not None:
            ids = list(msg_ids)
            if len(ids) != len(data):
                raise ValueError(f"spout {self._component!r}: emit_batch got {len(ids)} msg_ids for {len(data)} rows")
            for values, m in zip(data, ids):
                self.emit(values, msg_id=m, stream=stream)
        else:
            if msg_id is _UNSET:
                raise TypeError(f"spout {self._component!r}: emit_batch(rows, msg_id) needs msg_id (one tree for "
                                "all rows) or msg_ids= (one per row)")
            shared = msg_id if type(msg_id) is SharedRoot else SharedRoot(msg_id)  # given: joins its tree
            for values in data:
                self.emit(values, msg_id=shared, stream=stream)

    def _emit_columns(self, data: Any, msg_id: Any, msg_ids: Any, stream: str) -> None:
        from squall.api.columns import declared_columns  # noqa: PLC0415 - pyarrow only when columns are emitted

        so, batch = declared_columns(self._streams, self._component, stream, data,
                                     f"spout {self._component!r}: emit_batch of columns on direct stream {stream!r} "
                                     "is not supported; emit_direct(task, values, msg_id) each row")
        ids = None
        if msg_ids is not None:
            ids = msg_ids.to_pylist() if hasattr(msg_ids, "to_pylist") else \
                msg_ids.tolist() if hasattr(msg_ids, "tolist") else list(msg_ids)
            if len(ids) != batch.num_rows:
                raise ValueError(f"spout {self._component!r}: emit_batch got {len(ids)} msg_ids for "
                                 f"{batch.num_rows} rows; give one msg id per row")
        self._columns.append((so, batch, ids, None if msg_id is _UNSET or msg_id is None else SharedRoot(msg_id)))
        self._column_rows += batch.num_rows

    def report_error(self, error: BaseException | str) -> None:
        self._runner.report_error(error)
