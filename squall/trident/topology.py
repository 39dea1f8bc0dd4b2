"""TridentTopology: streams of batches, compiled to a Storm topology that LocalCluster runs."""

from __future__ import annotations

from typing import Any

from squall.api.topology import StormTopology
from squall.trident.compiler import Compiler, guarantee
from squall.trident.coordinator import BATCH_FIELD
from squall.trident.drpc import DRPCSpout
from squall.trident.graph import Node, check_fields, names
from squall.trident.operations import CombinerAggregator
from squall.trident.spouts import TridentSpout

__all__ = ["GroupedStream", "Stream", "TridentState", "TridentTopology", "guarantee"]



class Stream:
    """A stream of batches. Every operation returns a new Stream (or a TridentState)."""

    def __init__(self, topology: TridentTopology, node: Node):
        self._t = topology
        self._node = node

    @property
    def fields(self) -> list[str]:
        return list(self._node.fields[1:])

    def _new(self, kind: str, fields: tuple[str, ...], **params: Any) -> Stream:
        return Stream(self._t, self._node.add(kind, fields, **params))

    def each(self, fields: Any, function: Any, out_fields: Any = None) -> Stream:
        fields = names(fields)
        check_fields(self._node.fields, fields, f"each({list(fields)})")
        if out_fields is None:
            if hasattr(function, "is_keep"):
                return self.filter(fields, function)
            raise ValueError("each(fields, function, out_fields): out_fields names what the function emits")
        out = names(out_fields)
        clash = [f for f in out if f in self._node.fields]
        if clash:
            raise ValueError(f"each: output field(s) {clash} already exist in the stream")
        return self._new("each", self._node.fields + out, in_fields=fields, op=function)

    def filter(self, fields: Any, filter: Any = None) -> Stream:  # noqa: A002
        if filter is None:  # filter(filter): on all fields
            fields, filter = tuple(self._node.fields[1:]), fields
        fields = names(fields)
        check_fields(self._node.fields, fields, "filter")
        return self._new("filter", self._node.fields, in_fields=fields, op=filter)

    def project(self, fields: Any) -> Stream:
        fields = names(fields)
        check_fields(self._node.fields, fields, "project")
        return self._new("project", (BATCH_FIELD, *fields), in_fields=(BATCH_FIELD, *fields))

    def parallelism_hint(self, n: int) -> Stream:
        self._node.parallelism = int(n)
        return self

    def name(self, _name: str) -> Stream:
        return self

    def shuffle(self) -> Stream:
        return self._new("repartition", self._node.fields, grouping=("shuffle",))

    def partition_by(self, fields: Any) -> Stream:
        fields = names(fields)
        check_fields(self._node.fields, fields, "partition_by")
        return self._new("repartition", self._node.fields, grouping=("fields", fields))

    def global_(self) -> Stream:
        return self._new("repartition", self._node.fields, grouping=("global",))

    def group_by(self, fields: Any) -> GroupedStream:
        fields = names(fields)
        check_fields(self._node.fields, fields, "group_by")
        return GroupedStream(self, fields)

    def _agg(self, group: tuple[str, ...], fields: Any, agg: Any, out_fields: Any, partition: bool) -> Stream:
        if out_fields is None:  # aggregate(agg, out_fields): every field is input
            fields, agg, out_fields = tuple(self._node.fields[1:]), fields, agg
        fields, out = names(fields), names(out_fields)
        check_fields(self._node.fields, fields, "aggregate")
        return self._new("aggregate", (BATCH_FIELD, *group, *out), group=group, in_fields=fields, op=agg,
                         partition=partition)

    def aggregate(self, fields: Any, agg: Any, out_fields: Any = None) -> Stream:
        return self._agg((), fields, agg, out_fields, partition=False)

    def partition_aggregate(self, fields: Any, agg: Any, out_fields: Any = None) -> Stream:
        return self._agg((), fields, agg, out_fields, partition=True)

    def _persist(self, group: tuple[str, ...], factory: Any, a: Any, b: Any, c: Any) -> TridentState:
        if c is None:  # persistent_aggregate(factory, agg, out_fields)
            fields, agg, out = tuple(self._node.fields[1:]), a, b
        else:
            fields, agg, out = names(a), b, c
        check_fields(self._node.fields, fields, "persistent_aggregate")
        mode = "combine" if isinstance(agg, CombinerAggregator) else "reduce"
        if not hasattr(agg, "combine") and not hasattr(agg, "reduce"):
            raise TypeError("persistent_aggregate needs a CombinerAggregator (init/combine/zero, e.g. Count, Sum) "
                            f"or a ReducerAggregator (init/reduce); got {type(agg).__name__}")
        node = self._node.add("state", (BATCH_FIELD, *group, *names(out)), group=group, in_fields=fields, op=agg,
                              factory=factory, mode=mode)
        return TridentState(self._t, node)

    def persistent_aggregate(self, factory: Any, a: Any, b: Any = None, c: Any = None) -> TridentState:
        """(factory, aggregator, out_fields) or (factory, input_fields, aggregator, out_fields)."""
        return self._persist((), factory, a, b, c)

    def partition_persist(self, factory: Any, fields: Any, updater: Any, function_fields: Any = None) -> TridentState:
        fields = names(fields)
        check_fields(self._node.fields, fields, "partition_persist")
        out = (BATCH_FIELD, *names(function_fields)) if function_fields else (BATCH_FIELD,)
        node = self._node.add("state", out, group=None, in_fields=fields, op=updater, factory=factory, mode="update")
        return TridentState(self._t, node)

    def state_query(self, state: TridentState, fields: Any, function: Any, out_fields: Any) -> Stream:
        fields, out = names(fields), names(out_fields)
        check_fields(self._node.fields, fields, "state_query")
        return self._new("state_query", self._node.fields + out, in_fields=fields, op=function,
                         factory=state.factory)


class GroupedStream:
    def __init__(self, stream: Stream, group: tuple[str, ...]):
        self._s = stream
        self._group = group

    def aggregate(self, fields: Any, agg: Any, out_fields: Any = None) -> Stream:
        return self._s._agg(self._group, fields, agg, out_fields, partition=False)

    def partition_aggregate(self, fields: Any, agg: Any, out_fields: Any = None) -> Stream:
        return self._s._agg(self._group, fields, agg, out_fields, partition=True)

    def persistent_aggregate(self, factory: Any, a: Any, b: Any = None, c: Any = None) -> TridentState:
        return self._s._persist(self._group, factory, a, b, c)

    def __getattr__(self, name: str) -> Any:  # each/filter/... on a grouped stream act on the stream
        return getattr(self._s, name)


class TridentState:
    """A state that batches update; `multi_get(keys)` reads the committed values."""

    def __init__(self, topology: TridentTopology, node: Node):
        self._t = topology
        self._node = node

    @property
    def factory(self) -> Any:
        return self._node.params["factory"]

    def parallelism_hint(self, n: int) -> TridentState:
        self._node.parallelism = int(n)
        return self

    def multi_get(self, keys: list[list]) -> list:
        state = self.factory.make_state({}, 0, 1)
        try:
            return state.multi_get([list(k) for k in keys])
        finally:
            close = getattr(state, "close", None)
            if close is not None:
                close()

    def new_values_stream(self) -> Stream:
        """The values each batch's commit wrote: key..., value (persistent_aggregate) or what a
        StateUpdater emits (partition_persist). Processed in the commit's tuple tree: if it fails
        downstream, the commit is retried (the state skips or recomputes the txid) and the
        same values are emitted again."""
        if self._node.params["mode"] == "update" and len(self._node.fields) == 1:
            raise ValueError("new_values_stream() of a partition_persist: name the fields its StateUpdater emits, "
                             "partition_persist(factory, fields, updater, function_fields)")
        return Stream(self._t, self._node)


class TridentTopology:
    def __init__(self) -> None:
        self._spouts: list[tuple[str, TridentSpout, Node]] = []
        self._drpcs: list[tuple[Node, str, str, Any]] = []

    def new_stream(self, txid: str, spout: TridentSpout) -> Stream:
        if any(name == txid for name, _, _ in self._spouts):
            raise ValueError(f"a stream named {txid!r} already exists")
        if not hasattr(spout, "get_output_fields"):
            raise TypeError(f"new_stream needs a Trident spout (FixedBatchSpout, TransactionalSpout, ...), "
                            f"got {type(spout).__name__}")
        node = Node("spout", None, (BATCH_FIELD, *spout.get_output_fields()))
        self._spouts.append((txid, spout, node))
        return Stream(self, node)

    def new_drpc_stream(self, function: str, drpc: Any) -> Stream:
        """Storm's newDRPCStream: a stream of one field, "args", one request per batch; its last
        operation's tuples are the answer `drpc.execute(function, args)` returns, as JSON."""
        if not isinstance(function, str) or not function:
            raise ValueError(f"new_drpc_stream(function, drpc): function is a non-empty name, got {function!r}")
        name = f"drpc-{function}"
        if any(n == name for n, _, _ in self._spouts):
            raise ValueError(f"a DRPC stream for function {function!r} already exists in this topology")
        stream = self.new_stream(name, DRPCSpout(function, drpc))
        self._drpcs.append((stream._node, name, function, drpc))
        return stream

    def merge(self, *streams: Stream) -> Stream:
        """One stream of the tuples of all `streams` (same number of fields; named as the first's)."""
        streams = _flatten(streams)
        if len(streams) < 2:
            raise ValueError(f"merge needs at least two streams, got {len(streams)}")
        _same_batches("merge", streams)
        width = len(streams[0].fields)
        for s in streams[1:]:
            if len(s.fields) != width:
                raise ValueError(f"merge: every stream needs {width} fields like the first ({streams[0].fields}); "
                                 f"one has {s.fields}. Use .project(...) to line them up")
        return self._multi("merge", streams, streams[0]._node.fields, {})

    def join(self, s1: Stream, fields1: Any, s2: Stream, fields2: Any, out_fields: Any) -> Stream:
        """Inner join of two streams within each batch, on fields1 == fields2. Output fields:
        the join fields, then s1's other fields, then s2's (named by `out_fields`)."""
        fields1, fields2, out = names(fields1), names(fields2), names(out_fields)
        _same_batches("join", [s1, s2])
        check_fields(s1._node.fields, fields1, "join (first stream)")
        check_fields(s2._node.fields, fields2, "join (second stream)")
        if len(fields1) != len(fields2) or not fields1:
            raise ValueError(f"join: give as many join fields for each stream, at least one; got {list(fields1)} "
                             f"and {list(fields2)}")
        width = len(s1.fields) + len(s2.fields) - len(fields2)
        if len(out) != width or len(set(out)) != len(out):
            raise ValueError(f"join: out_fields names the {width} distinct output fields: the join fields, then "
                             f"{[f for f in s1.fields if f not in fields1]} of the first stream, then "
                             f"{[f for f in s2.fields if f not in fields2]} of the second; got {list(out)}")
        return self._multi("join", [s1, s2], (BATCH_FIELD, *out), {"keys": (fields1, fields2)})

    def _multi(self, kind: str, streams: list[Stream], fields: tuple[str, ...], params: dict) -> Stream:
        parents = tuple(s._node for s in streams)
        node = Node(kind, parents[0], fields, params, parents=parents)
        for p in parents:
            p.children.append(node)
        return Stream(self, node)

    def build(self) -> StormTopology:
        return Compiler(self._spouts, self._drpcs).build()


def _flatten(streams: tuple) -> list[Stream]:
    if len(streams) == 1 and isinstance(streams[0], (list, tuple)):
        streams = tuple(streams[0])
    for s in streams:
        if not isinstance(s, Stream):
            raise TypeError(f"merge/join take Trident streams, got {type(s).__name__}")
    return list(streams)


def _same_batches(what: str, streams: list[Stream]) -> None:
    """Every spout of a topology takes part in the same batches (one txid for all), so streams of
    any spouts merge and join; a DRPC stream's batches are its requests, so it only meets its own."""
    if len({id(s._node) for s in streams}) != len(streams):
        raise ValueError(f"{what}: the same stream is given twice; to use it twice, give one copy its own "
                         "operation first (e.g. .project(...))")
    roots = {id(s._node.root) for s in streams}
    drpc = {id(node) for node, *_ in streams[0]._t._drpcs}
    if len(roots) > 1 and roots & drpc:
        raise ValueError(f"{what}: a DRPC stream runs one request per batch, with txids of its own, so it can be "
                         "merged or joined only with streams of the same DRPC stream")
