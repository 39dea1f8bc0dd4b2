"""TridentTopology: streams of batches, compiled to a Storm topology that LocalCluster runs."""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

from squall.api.topology import StormTopology, TopologyBuilder
from squall.trident.bolts import HeadSpec, OpSpec, ProcessorBolt, Segment, StateBolt, StateSpec, TailSpec
from squall.trident.coordinator import BATCH_FIELD, COMMIT_STREAM, TridentSpoutExecutor
from squall.trident.operations import CombinerAggregator
from squall.trident.spouts import NON_TRANSACTIONAL, OPAQUE, TRANSACTIONAL, TridentSpout

log = logging.getLogger("squall.trident")

STREAMING = ("each", "filter", "project")
PARTIAL = "$partial"


def guarantee(spout_kind: str, state_kind: str) -> str:
    """Storm's table: which spout and state kinds together give exactly-once."""
    if (spout_kind == TRANSACTIONAL and state_kind in (TRANSACTIONAL, OPAQUE)) or \
            (spout_kind == OPAQUE and state_kind == OPAQUE):
        return "exactly-once"
    if spout_kind == NON_TRANSACTIONAL:
        return "at-most-once (a failed batch of a non-transactional spout is not replayed)"
    if state_kind == "non-transactional":
        return "at-least-once (a replayed batch is applied again to non-transactional state)"
    return ("neither exactly-once nor at-least-once (an opaque spout's replayed batch may differ, and "
            "transactional state skips keys it already holds for that txid)")


@dataclass(eq=False)
class _Node:
    kind: str
    parent: _Node | None
    fields: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)
    children: list[_Node] = field(default_factory=list)
    parallelism: int | None = None

    def add(self, kind: str, fields: tuple[str, ...], **params: Any) -> _Node:
        n = _Node(kind, self, fields, params)
        self.children.append(n)
        return n


def _names(fields: Any) -> tuple[str, ...]:
    if isinstance(fields, str):
        return (fields,)
    return tuple(fields)


def _check_fields(have: tuple[str, ...], want: tuple[str, ...], what: str) -> None:
    missing = [f for f in want if f not in have]
    if missing:
        raise ValueError(f"{what}: unknown field(s) {missing}; the stream has {list(have[1:])}")


class Stream:
    """A stream of batches. Every operation returns a new Stream (or a TridentState)."""

    def __init__(self, topology: TridentTopology, node: _Node):
        self._t = topology
        self._node = node

    @property
    def fields(self) -> list[str]:
        return list(self._node.fields[1:])

    def _new(self, kind: str, fields: tuple[str, ...], **params: Any) -> Stream:
        return Stream(self._t, self._node.add(kind, fields, **params))

    def each(self, fields: Any, function: Any, out_fields: Any = None) -> Stream:
        fields = _names(fields)
        _check_fields(self._node.fields, fields, f"each({list(fields)})")
        if out_fields is None:
            if hasattr(function, "is_keep"):
                return self.filter(fields, function)
            raise ValueError("each(fields, function, out_fields): out_fields names what the function emits")
        out = _names(out_fields)
        clash = [f for f in out if f in self._node.fields]
        if clash:
            raise ValueError(f"each: output field(s) {clash} already exist in the stream")
        return self._new("each", self._node.fields + out, in_fields=fields, op=function)

    def filter(self, fields: Any, filter: Any = None) -> Stream:  # noqa: A002
        if filter is None:  # filter(filter): on all fields
            fields, filter = tuple(self._node.fields[1:]), fields
        fields = _names(fields)
        _check_fields(self._node.fields, fields, "filter")
        return self._new("filter", self._node.fields, in_fields=fields, op=filter)

    def project(self, fields: Any) -> Stream:
        fields = _names(fields)
        _check_fields(self._node.fields, fields, "project")
        return self._new("project", (BATCH_FIELD, *fields), in_fields=(BATCH_FIELD, *fields))

    def parallelism_hint(self, n: int) -> Stream:
        self._node.parallelism = int(n)
        return self

    def name(self, _name: str) -> Stream:
        return self

    def shuffle(self) -> Stream:
        return self._new("repartition", self._node.fields, grouping=("shuffle",))

    def partition_by(self, fields: Any) -> Stream:
        fields = _names(fields)
        _check_fields(self._node.fields, fields, "partition_by")
        return self._new("repartition", self._node.fields, grouping=("fields", fields))

    def global_(self) -> Stream:
        return self._new("repartition", self._node.fields, grouping=("global",))

    def group_by(self, fields: Any) -> GroupedStream:
        fields = _names(fields)
        _check_fields(self._node.fields, fields, "group_by")
        return GroupedStream(self, fields)

    def _agg(self, group: tuple[str, ...], fields: Any, agg: Any, out_fields: Any, partition: bool) -> Stream:
        if out_fields is None:  # aggregate(agg, out_fields): every field is input
            fields, agg, out_fields = tuple(self._node.fields[1:]), fields, agg
        fields, out = _names(fields), _names(out_fields)
        _check_fields(self._node.fields, fields, "aggregate")
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
            fields, agg, out = _names(a), b, c
        _check_fields(self._node.fields, fields, "persistent_aggregate")
        mode = "combine" if isinstance(agg, CombinerAggregator) else "reduce"
        if not hasattr(agg, "combine") and not hasattr(agg, "reduce"):
            raise TypeError("persistent_aggregate needs a CombinerAggregator (init/combine/zero, e.g. Count, Sum) "
                            f"or a ReducerAggregator (init/reduce); got {type(agg).__name__}")
        node = self._node.add("state", (BATCH_FIELD, *group, *_names(out)), group=group, in_fields=fields, op=agg,
                              factory=factory, mode=mode)
        return TridentState(self._t, node)

    def persistent_aggregate(self, factory: Any, a: Any, b: Any = None, c: Any = None) -> TridentState:
        """(factory, aggregator, out_fields) or (factory, input_fields, aggregator, out_fields)."""
        return self._persist((), factory, a, b, c)

    def partition_persist(self, factory: Any, fields: Any, updater: Any, function_fields: Any = None) -> TridentState:
        fields = _names(fields)
        _check_fields(self._node.fields, fields, "partition_persist")
        node = self._node.add("state", self._node.fields, group=None, in_fields=fields, op=updater,
                              factory=factory, mode="update")
        return TridentState(self._t, node)

    def state_query(self, state: TridentState, fields: Any, function: Any, out_fields: Any) -> Stream:
        fields, out = _names(fields), _names(out_fields)
        _check_fields(self._node.fields, fields, "state_query")
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

    def __init__(self, topology: TridentTopology, node: _Node):
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
        raise NotImplementedError("new_values_stream is not supported yet")


class TridentTopology:
    def __init__(self) -> None:
        self._spouts: list[tuple[str, TridentSpout, _Node]] = []
        self._ids = itertools.count()

    def new_stream(self, txid: str, spout: TridentSpout) -> Stream:
        if any(name == txid for name, _, _ in self._spouts):
            raise ValueError(f"a stream named {txid!r} already exists")
        if not hasattr(spout, "get_output_fields"):
            raise TypeError(f"new_stream needs a Trident spout (FixedBatchSpout, TransactionalSpout, ...), "
                            f"got {type(spout).__name__}")
        node = _Node("spout", None, (BATCH_FIELD, *spout.get_output_fields()))
        self._spouts.append((txid, spout, node))
        return Stream(self, node)

    # -- compilation --------------------------------------------------------------------------

    def build(self) -> StormTopology:
        b = TopologyBuilder()
        for txid, spout, node in self._spouts:
            states = [n for n in _walk(node) if n.kind in ("state",)]
            factories = [n.params["factory"] for n in states]
            for n in states:
                g = guarantee(spout.kind, n.params["factory"].kind)
                if g != "exactly-once":
                    log.warning("trident stream %r: %s spout into %s state gives %s", txid, spout.kind,
                                n.params["factory"].kind, g)
            meta = next((f for f in factories if hasattr(f, "meta_store")), None)
            b.set_spout(txid, TridentSpoutExecutor(txid, spout, meta))
            self._commit_targets: list[str] = []
            for child in node.children:
                self._start(b, txid, child, txid, ("shuffle",), False)
        return b.create_topology()

    def _subscribe(self, decl: Any, upstream: str, grouping: tuple) -> None:
        kind = grouping[0]
        if kind == "fields":
            decl.fields_grouping(upstream, list(grouping[1]))
        else:
            getattr(decl, f"{kind}_grouping")(upstream)

    def _grouping_for(self, child: _Node, partials: bool) -> tuple:
        if child.kind == "repartition":
            return child.params["grouping"]
        if child.kind in ("aggregate", "state"):
            group = child.params.get("group")
            if child.kind == "aggregate" and child.params.get("partition"):
                return ("local_or_shuffle",)
            if child.kind == "state" and child.params["mode"] == "update":
                return ("local_or_shuffle",)
            return ("fields", group) if group else ("global",)
        return ("local_or_shuffle",)

    def _start(self, b: TopologyBuilder, txid: str, node: _Node, upstream: str, grouping: tuple,
               partials: bool) -> None:
        if node.kind == "repartition":
            for child in node.children:
                self._start(b, txid, child, upstream, node.params["grouping"], False)
            return
        if node.kind == "state":
            self._state_bolt(b, txid, node, upstream, grouping, partials)
            return
        fields_in = node.parent.fields
        seg = Segment()
        par = node.parallelism
        if node.kind == "aggregate":
            p = node.params
            group = p["group"]
            seg.head = HeadSpec("aggregate", tuple(range(1, 1 + len(group))) if partials else _idx(fields_in, group),
                                _idx(fields_in, p["in_fields"]) if not partials else (),
                                p["in_fields"], p["op"], from_partials=partials)
            if not group and not p["partition"]:
                par = 1
        elif node.kind == "state_query":
            p = node.params
            seg.head = HeadSpec("state_query", (), _idx(fields_in, p["in_fields"]), p["in_fields"], p["op"],
                                factory=p["factory"])
        else:
            seg.ops.append(_op(node))
        cur = node
        while len(cur.children) == 1 and cur.children[0].kind in STREAMING:
            cur = cur.children[0]
            seg.ops.append(_op(cur))
            par = cur.parallelism or par
        seg.out_fields = cur.fields
        children = cur.children
        tail_child = None
        if len(children) == 1 and children[0].kind in ("aggregate", "state") \
                and isinstance(children[0].params.get("op"), CombinerAggregator) \
                and not children[0].params.get("partition") and children[0].params.get("mode", "combine") == "combine":
            c = children[0]
            group = c.params["group"] or ()
            seg.tail = TailSpec(_idx(cur.fields, group), _idx(cur.fields, c.params["in_fields"]),
                                c.params["in_fields"], c.params["op"])
            seg.out_fields = (BATCH_FIELD, *group, PARTIAL)
            tail_child = c
        comp = f"{txid}-b{next(self._ids)}"
        self._subscribe(b.set_bolt(comp, ProcessorBolt(seg), par or 1), upstream, grouping)
        for child in children:
            self._start(b, txid, child, comp, self._grouping_for(child, child is tail_child), child is tail_child)

    def _state_bolt(self, b: TopologyBuilder, txid: str, node: _Node, upstream: str, grouping: tuple,
                    partials: bool) -> None:
        p = node.params
        fields_in = node.parent.fields
        group = p["group"] or ()
        if partials:
            spec = StateSpec(p["factory"], "combine", tuple(range(1, 1 + len(group))), (), p["in_fields"], p["op"],
                             from_partials=True)
        else:
            spec = StateSpec(p["factory"], p["mode"], _idx(fields_in, group), _idx(fields_in, p["in_fields"]),
                             p["in_fields"], p["op"])
        par = 1 if (p["mode"] != "update" and not group) else (node.parallelism or 1)
        comp = f"{txid}-state{next(self._ids)}"
        decl = b.set_bolt(comp, StateBolt(spec), par)
        self._subscribe(decl, upstream, grouping)
        decl.all_grouping(txid, stream=COMMIT_STREAM)


def _idx(fields: tuple[str, ...], names: tuple[str, ...] | None) -> tuple[int, ...]:
    return tuple(fields.index(n) for n in (names or ()))


def _op(node: _Node) -> OpSpec:
    fields_in = node.parent.fields
    names = node.params["in_fields"]
    return OpSpec(node.kind, _idx(fields_in, names), names, node.params.get("op"))


def _walk(node: _Node) -> list[_Node]:
    out = [node]
    for c in node.children:
        out.extend(_walk(c))
    return out
