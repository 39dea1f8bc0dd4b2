"""Compiles a Trident graph (squall.trident.graph) to a Storm topology.

Runs of streaming operations (each, filter, project) fuse into one `ProcessorBolt`; a step
that needs a whole batch in a partition (aggregate, state query, join) starts a new one; a
combiner aggregation is pre-combined at the end of the segment before it; states become
`StateBolt`s that the spout's commit stream reaches. A merge or join bolt is subscribed once
per input stream. The last stream of a DRPC stream feeds a `ReturnResultsBolt`.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

from squall.api.topology import StormTopology, TopologyBuilder
from squall.trident.bolts import HeadSpec, OpSpec, ProcessorBolt, Segment, StateBolt, StateSpec, TailSpec
from squall.trident.coordinator import BATCH_FIELD, COMMIT_STREAM, Source, TridentSpoutExecutor
from squall.trident.drpc import IN_FLIGHT, DRPCSpout, ReturnResultsBolt
from squall.trident.graph import Node, walk
from squall.trident.join import JoinSpec
from squall.trident.operations import CombinerAggregator, ReducerAggregator
from squall.trident.spouts import NON_TRANSACTIONAL, OPAQUE, TRANSACTIONAL

log = logging.getLogger("squall.trident")

STREAMING = ("each", "filter", "project")
Out = tuple[str, str]  # (component, stream): where a node's rows come out
PARTIAL = "$partial"

__all__ = ["Compiler", "guarantee"]


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


class Compiler:
    def __init__(self, spouts: list[tuple[str, Any, Node]], drpcs: list[tuple[Node, str, str, Any]]) -> None:
        self.spouts = spouts
        self.drpcs = drpcs
        self.b = TopologyBuilder()
        self.ids = itertools.count()
        self.comp_of: dict[Node, Out] = {}  # node -> where its rows come out
        # merge/join -> (component, declarer, the components subscribed, the join's spec)
        self.multi: dict[Node, tuple[str, Any, set[str], JoinSpec | None]] = {}

    def build(self) -> StormTopology:
        """One batch coordinator for every spout (one txid for all, as Storm's master batch
        coordinator), and one for each DRPC stream (its batches are its requests)."""
        plain = [sp for sp in self.spouts if not isinstance(sp[1], DRPCSpout)]
        groups = ([plain] if plain else []) + [[sp] for sp in self.spouts if isinstance(sp[1], DRPCSpout)]
        for group in groups:
            self._coordinator(group)
        for node, name, function, drpc in self.drpcs:
            self._return_results(node, name, function, drpc)
        return self.b.create_topology()

    def _coordinator(self, group: list[tuple[str, Any, Node]]) -> None:
        nodes = {id(n): n for _, _, root in group for n in walk(root)}.values()
        _check_new_values(list(nodes))
        states = [n for n in nodes if n.kind == "state"]
        for txid, spout, root in group:
            mine = {id(n) for n in walk(root)}
            for n in states:
                if id(n) not in mine:
                    continue
                g = guarantee(spout.kind, n.params["factory"].kind)
                if g != "exactly-once":
                    log.warning("trident stream %r: %s spout into %s state gives %s", txid, spout.kind,
                                n.params["factory"].kind, g)
        meta = next((n.params["factory"] for n in states if hasattr(n.params["factory"], "meta_store")), None)
        single = len(group) == 1
        name = group[0][0] if single else "+".join(txid for txid, _, _ in group)
        in_flight = IN_FLIGHT if isinstance(group[0][1], DRPCSpout) else 1
        spouts = group[0][1] if single else [Source(txid, spout, txid) for txid, spout, _ in group]
        self.b.set_spout(name, TridentSpoutExecutor(name, spouts, meta, max_in_flight=in_flight))
        for txid, _, root in group:
            out = (name, "default" if single else txid)
            self.comp_of[root] = out
            for child in root.children:
                self.start(name, child, out, ("shuffle",), False, root)

    # -- bolts --------------------------------------------------------------------------------

    def start(self, txid: str, node: Node, upstream: Out, grouping: tuple, partials: bool, via: Node) -> None:
        """Compile `node` (reached from `via`, whose rows `upstream` emits with `grouping`)."""
        if node.kind == "repartition":
            self.comp_of[node] = upstream
            for child in node.children:
                self.start(txid, child, upstream, node.params["grouping"], False, node)
            return
        if node.kind == "state":
            self._state_bolt(txid, node, upstream, grouping, partials)
            return
        if node in self.multi:  # a merge or join already compiled from another of its inputs
            self._input(node, upstream, grouping, via)
            return
        seg, par = self._head(node, partials)
        cur = node
        while len(cur.children) == 1 and cur.children[0].kind in STREAMING:
            cur = cur.children[0]
            seg.ops.append(_op(cur))
            par = cur.parallelism or par
        seg.out_fields = cur.fields
        tail_child = self._tail(seg, cur)
        comp = f"{txid}-b{next(self.ids)}"
        decl = self.b.set_bolt(comp, ProcessorBolt(seg), par or 1)
        if node.kind in ("merge", "join"):
            self.multi[node] = (comp, decl, set(), seg.head.op if node.kind == "join" else None)
            self._input(node, upstream, grouping, via)
        else:
            _subscribe(decl, upstream, grouping)
        if tail_child is None:
            self.comp_of[cur] = (comp, "default")
        for child in cur.children:
            self.start(txid, child, (comp, "default"), _grouping_for(child), child is tail_child, cur)

    def _head(self, node: Node, partials: bool) -> tuple[Segment, int | None]:
        seg = Segment()
        par = node.parallelism
        fields_in = node.parent.fields
        p = node.params
        if node.kind == "aggregate":
            group = p["group"]
            seg.head = HeadSpec("aggregate", tuple(range(1, 1 + len(group))) if partials else _idx(fields_in, group),
                                _idx(fields_in, p["in_fields"]) if not partials else (),
                                p["in_fields"], p["op"], from_partials=partials)
            if not group and not p["partition"]:
                par = 1
        elif node.kind == "state_query":
            seg.head = HeadSpec("state_query", (), _idx(fields_in, p["in_fields"]), p["in_fields"], p["op"],
                                factory=p["factory"])
        elif node.kind == "join":
            keys = [_idx(s.fields, k) for s, k in zip(node.parents, p["keys"])]
            rest = [tuple(i for i in range(1, len(s.fields)) if i not in k) for s, k in zip(node.parents, keys)]
            seg.head = HeadSpec("join", (), (), (), JoinSpec({}, keys, rest))
        elif node.kind != "merge":  # a merge passes rows on as they are (positions, not names)
            seg.ops.append(_op(node))
        return seg, par

    @staticmethod
    def _tail(seg: Segment, cur: Node) -> Node | None:
        """A lone combiner aggregation after `cur`: pre-combine per partition, before the shuffle."""
        children = cur.children
        if len(children) == 1 and children[0].kind in ("aggregate", "state") \
                and isinstance(children[0].params.get("op"), CombinerAggregator) \
                and not children[0].params.get("partition") and children[0].params.get("mode", "combine") == "combine":
            c = children[0]
            group = c.params["group"] or ()
            seg.tail = TailSpec(_idx(cur.fields, group), _idx(cur.fields, c.params["in_fields"]),
                                c.params["in_fields"], c.params["op"])
            seg.out_fields = (BATCH_FIELD, *group, PARTIAL)
            return c
        return None

    def _input(self, node: Node, upstream: Out, grouping: tuple, via: Node) -> None:
        comp, decl, inputs, join = self.multi[node]
        if upstream in inputs:
            raise ValueError(f"{node.kind}: two of its input streams come out of the same component ({upstream[0]}); "
                             "give each its own operation first (e.g. .each or .project on one of them)")
        inputs.add(upstream)
        if node.kind == "join":
            side = node.parents.index(via)
            grouping = ("fields", node.params["keys"][side])
            join.sides[upstream] = side
        _subscribe(decl, upstream, grouping)

    def _state_bolt(self, txid: str, node: Node, upstream: Out, grouping: tuple, partials: bool) -> None:
        p = node.params
        fields_in = node.parent.fields
        group = p["group"] or ()
        if partials:
            spec = StateSpec(p["factory"], "combine", tuple(range(1, 1 + len(group))), (), p["in_fields"], p["op"],
                             from_partials=True)
        else:
            spec = StateSpec(p["factory"], p["mode"], _idx(fields_in, group), _idx(fields_in, p["in_fields"]),
                             p["in_fields"], p["op"])
        if node.children:
            spec.out_fields = node.fields  # new_values_stream(): the state emits its new values
        par = 1 if (p["mode"] != "update" and not group) else (node.parallelism or 1)
        comp = f"{txid}-state{next(self.ids)}"
        decl = self.b.set_bolt(comp, StateBolt(spec), par)
        _subscribe(decl, upstream, grouping)
        decl.all_grouping(txid, stream=COMMIT_STREAM)
        self.comp_of[node] = (comp, "default")
        for child in node.children:
            self.start(txid, child, (comp, "default"), _grouping_for(child), False, node)

    def _return_results(self, spout_node: Node, name: str, function: str, drpc: Any) -> None:
        tail = max(walk(spout_node), key=lambda n: n.order)  # Storm: the last node added to the DRPC stream
        if tail.kind == "state":
            raise ValueError(f"the DRPC stream {function!r} ends with a state; its last operation must give the "
                             "result stream (e.g. state.new_values_stream(), or a state_query)")
        spout = next(sp for n, sp, _ in self.spouts if n == name)
        spout.empty_result = _empty_result(tail)
        comp, stream = self.comp_of[tail]
        self.b.set_bolt(f"{name}-return", ReturnResultsBolt(drpc, function), 1) \
            .global_grouping(comp, stream=stream)


def _empty_result(tail: Node) -> list[list]:
    """What a batch with no tuples gives at the end of a DRPC stream. As Storm: a global
    aggregation still completes, with the aggregator's zero() (combiner) or init() (reducer)."""
    p = tail.params
    if tail.kind != "aggregate" or p["group"] or p["partition"]:
        return []
    agg = p["op"]
    if isinstance(agg, CombinerAggregator):
        return [[agg.zero()]]
    if isinstance(agg, ReducerAggregator):
        return [[agg.init()]]
    return []


def _check_new_values(nodes: list[Node]) -> None:
    """A state downstream of another state's new values would commit the same txid at once."""
    for n in nodes:
        if n.kind != "state":
            continue
        todo, seen = list(n.parents), set()
        while todo:
            up = todo.pop()
            if id(up) in seen:
                continue
            seen.add(id(up))
            if up.kind == "state":
                raise ValueError("a persistent state fed by new_values_stream() is not supported: both would "
                                 "commit the same txid at once. Persist the original stream in both states instead")
            todo.extend(up.parents)


def _subscribe(decl: Any, upstream: Out, grouping: tuple) -> None:
    comp, stream = upstream
    kind = grouping[0]
    if kind == "fields":
        decl.fields_grouping(comp, list(grouping[1]), stream=stream)
    else:
        getattr(decl, f"{kind}_grouping")(comp, stream=stream)


def _grouping_for(child: Node) -> tuple:
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


def _idx(fields: tuple[str, ...], names: tuple[str, ...] | None) -> tuple[int, ...]:
    return tuple(fields.index(n) for n in (names or ()))


def _op(node: Node) -> OpSpec:
    fields_in = node.parent.fields
    names = node.params["in_fields"]
    return OpSpec(node.kind, _idx(fields_in, names), names, node.params.get("op"))
