"""TopologyBuilder, the groupings, and the validated StormTopology it creates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from squall.api.components import BasicBolt, Bolt, Component, InvalidTopologyException, Spout, user_instance

DEFAULT_STREAM = "default"

GROUPINGS = ("shuffle", "fields", "all", "global", "none", "direct", "local_or_shuffle")


@dataclass(frozen=True)
class StreamDecl:
    fields: tuple[str, ...]
    direct: bool = False


class OutputFieldsDeclarer:
    """Collects what a component declares in `declare_output_fields`."""

    def __init__(self, component_id: str):
        self.component_id = component_id
        self.streams: dict[str, StreamDecl] = {}

    def declare(self, fields: list[str], stream: str = DEFAULT_STREAM, direct: bool = False) -> None:
        if isinstance(fields, str):
            raise TypeError(
                f"component {self.component_id!r}: declare() takes a list of field names, "
                f"got the string {fields!r}; write declare([{fields!r}])"
            )
        names = tuple(fields)
        if len(set(names)) != len(names):
            raise InvalidTopologyException(
                f"component {self.component_id!r} declares duplicate field names {list(names)} "
                f"on stream {stream!r}"
            )
        self.streams[stream] = StreamDecl(names, bool(direct))

    def declare_stream(self, stream: str, fields: list[str], direct: bool = False) -> None:
        self.declare(fields, stream=stream, direct=direct)


@dataclass(frozen=True)
class Grouping:
    kind: str
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Subscription:
    source: str
    stream: str
    grouping: Grouping


@dataclass
class ComponentSpec:
    id: str
    obj: Any
    parallelism: int
    is_spout: bool
    inputs: list[Subscription] = field(default_factory=list)
    conf: dict = field(default_factory=dict)
    streams: dict[str, StreamDecl] = field(default_factory=dict)


class BoltDeclarer:
    """Returned by `set_bolt`: chain groupings to say what the bolt subscribes to."""

    def __init__(self, spec: ComponentSpec):
        self._spec = spec

    def _add(self, source: str, stream: str, kind: str, fields: tuple[str, ...] = ()) -> BoltDeclarer:
        self._spec.inputs.append(Subscription(source, stream, Grouping(kind, fields)))
        return self

    def shuffle_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, "shuffle")

    def fields_grouping(self, component: str, fields: list[str], stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        if isinstance(fields, str):
            fields = [fields]
        return self._add(component, stream, "fields", tuple(fields))

    def all_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, "all")

    def global_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, "global")

    def none_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, "none")

    def direct_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, "direct")

    def local_or_shuffle_grouping(self, component: str, stream: str = DEFAULT_STREAM) -> BoltDeclarer:
        return self._add(component, stream, "local_or_shuffle")

    def add_configuration(self, key: str, value: Any) -> BoltDeclarer:
        self._spec.conf[key] = value
        return self

    def set_num_tasks(self, n: int) -> BoltDeclarer:
        self._spec.parallelism = int(n)
        return self


class SpoutDeclarer(BoltDeclarer):
    """Returned by `set_spout`: only configuration, no groupings."""


class TopologyBuilder:
    """Builds a StormTopology from spouts and bolts wired together by groupings."""

    def __init__(self) -> None:
        self._specs: dict[str, ComponentSpec] = {}
        self._duplicates: list[str] = []

    def _add(self, component_id: str, obj: Any, parallelism: int | None, is_spout: bool) -> ComponentSpec:
        if component_id in self._specs:
            self._duplicates.append(component_id)
        spec = ComponentSpec(component_id, obj, 1 if parallelism is None else int(parallelism), is_spout)
        if component_id not in self._specs:
            self._specs[component_id] = spec
        return spec

    def set_spout(self, component_id: str, spout: Spout, parallelism: int | None = None) -> SpoutDeclarer:
        return SpoutDeclarer(self._add(component_id, spout, parallelism, True))

    def set_bolt(self, component_id: str, bolt: Bolt | BasicBolt, parallelism: int | None = None) -> BoltDeclarer:
        if isinstance(bolt, Component):  # a windowed or stateful bolt runs in its executor
            bolt = bolt._run_by(component_id)
        return BoltDeclarer(self._add(component_id, bolt, parallelism, False))

    def create_topology(self) -> StormTopology:
        if self._duplicates:
            raise InvalidTopologyException(
                f"duplicate component id(s) {sorted(set(self._duplicates))}: every spout and bolt needs its own id"
            )
        return StormTopology(list(self._specs.values()))


class StormTopology:
    """A validated topology: components, declared streams, subscriptions, task ids, levels."""

    def __init__(self, specs: list[ComponentSpec]):
        self.specs: dict[str, ComponentSpec] = {s.id: s for s in specs}
        for s in specs:
            self._check_kind(s)
            own = s.obj.get_component_configuration()  # as Storm: the declarer's add_configuration wins
            if own:
                s.conf = {**own, **s.conf}
            declarer = OutputFieldsDeclarer(s.id)
            s.obj.declare_output_fields(declarer)
            s.streams = declarer.streams
        self._declare_derived_streams()
        self._validate()
        self.levels = self._compute_levels()
        self.task_ids: dict[str, list[int]] = {}
        self.task_component: dict[int, str] = {}
        next_id = 1
        for cid in sorted(self.specs):
            ids = list(range(next_id, next_id + self.specs[cid].parallelism))
            self.task_ids[cid] = ids
            for t in ids:
                self.task_component[t] = cid
            next_id += len(ids)
        # (source, stream) -> [(bolt id, grouping)] in bolt-id order, so routing is stable.
        self.subscribers: dict[tuple[str, str], list[tuple[str, Grouping]]] = {}
        for cid in sorted(self.specs):
            for sub in self.specs[cid].inputs:
                self.subscribers.setdefault((sub.source, sub.stream), []).append((cid, sub.grouping))

    def without_spout_instances(self, components: set[str] | None = None) -> StormTopology:
        """The topology as executors need it: routing and bolts, without the instances of the
        spouts in `components` (all of them when None): they stay on the driver and may hold
        things that cannot be pickled, like locks or connections."""
        t = object.__new__(StormTopology)
        t.__dict__.update(self.__dict__)
        t.specs = {}
        for cid, spec in self.specs.items():
            if spec.is_spout and (components is None or cid in components):
                spec = type(spec)(spec.id, None, spec.parallelism, True, list(spec.inputs), dict(spec.conf),
                                  dict(spec.streams))
            t.specs[cid] = spec
        return t

    def settling_tasks(self) -> frozenset[int]:
        """The tasks that settle every input in the wave they get it, so a batch sent to one needs
        no edge per row (reliability/settled.py): a columnar bolt's, a BasicBolt's (it acks each
        input when `execute` returns, or fails it) and a Bolt's (an input it holds gets an edge of
        its own when its batch ends); not a kind whose class says otherwise (a stateful bolt's)."""
        return frozenset(t for c, spec in self.specs.items()
                         if isinstance(spec.obj, Component) and spec.obj._settles_inputs for t in self.task_ids[c])

    @staticmethod
    def _check_kind(s: ComponentSpec) -> None:
        if s.parallelism < 1:
            raise InvalidTopologyException(f"component {s.id!r}: parallelism must be >= 1, got {s.parallelism}")
        if s.is_spout and not isinstance(s.obj, Spout):
            raise InvalidTopologyException(f"set_spout({s.id!r}, ...) needs a squall.Spout, got {type(s.obj).__name__}")
        if not s.is_spout and not (isinstance(s.obj, Component) and s.obj._bolt_kind):
            raise InvalidTopologyException(
                f"set_bolt({s.id!r}, ...) needs a squall.Bolt, squall.BasicBolt or squall.columnar.ColumnarBolt, "
                f"got {type(s.obj).__name__}"
            )
        if not s.is_spout:
            _check_fixed_attributes(s.id, s.obj)

    def _declare_derived_streams(self) -> None:
        """Streams whose fields come from a component's inputs (a windowed bolt's late tuple
        stream), declared once every component has declared its own."""
        for s in self.specs.values():
            hook = getattr(s.obj, "declare_late_stream", None)
            if hook is None:
                continue
            fields = [self.specs[i.source].streams[i.stream].fields for i in s.inputs
                      if i.source in self.specs and i.stream in self.specs[i.source].streams]
            declarer = OutputFieldsDeclarer(s.id)
            declarer.streams = s.streams
            if fields:
                hook(declarer, fields)
            s.obj.check_topology(s.conf, s.inputs, self.specs)  # e.g. the window must fit the message timeout

    def _validate(self) -> None:
        if not any(s.is_spout for s in self.specs.values()):
            raise InvalidTopologyException("a topology needs at least one spout")
        for s in self.specs.values():
            if s.is_spout and s.inputs:
                raise InvalidTopologyException(f"spout {s.id!r} cannot subscribe to streams")
            for sub in s.inputs:
                src = self.specs.get(sub.source)
                if src is None:
                    raise InvalidTopologyException(
                        f"bolt {s.id!r} subscribes to unknown component {sub.source!r}; "
                        f"known components: {sorted(self.specs)}"
                    )
                decl = src.streams.get(sub.stream)
                if decl is None:
                    raise InvalidTopologyException(
                        f"bolt {s.id!r} subscribes to stream {sub.stream!r} of {sub.source!r}, which "
                        f"declares only {sorted(src.streams)}"
                    )
                g = sub.grouping
                if g.kind == "fields":
                    missing = [f for f in g.fields if f not in decl.fields]
                    if missing or not g.fields:
                        raise InvalidTopologyException(
                            f"bolt {s.id!r}: fields grouping on {list(g.fields)} but stream {sub.stream!r} "
                            f"of {sub.source!r} declares fields {list(decl.fields)}"
                        )
                if (g.kind == "direct") != decl.direct:
                    what = "direct_grouping needs" if g.kind == "direct" else f"{g.kind} grouping cannot use"
                    raise InvalidTopologyException(
                        f"bolt {s.id!r}: {what} a direct stream; stream {sub.stream!r} of {sub.source!r} is "
                        f"{'direct' if decl.direct else 'not direct'} (declare(..., direct=True) makes it direct)"
                    )

    def _compute_levels(self) -> dict[str, int]:
        levels: dict[str, int] = {}
        visiting: set[str] = set()

        def level(cid: str, path: list[str]) -> int:
            if cid in levels:
                return levels[cid]
            if cid in visiting:
                cycle = path[path.index(cid):] + [cid]
                raise InvalidTopologyException(
                    f"the topology has a cycle {' -> '.join(cycle)}; squall runs each wave in topological "
                    "order, so streams must form a DAG"
                )
            visiting.add(cid)
            spec = self.specs[cid]
            if spec.is_spout:
                lv = 0
            else:
                lv = 1 + max((level(sub.source, path + [cid]) for sub in spec.inputs), default=0)
            visiting.discard(cid)
            levels[cid] = lv
            return lv

        for cid in self.specs:
            level(cid, [])
        return levels

    # -- queries ------------------------------------------------------------------------

    @property
    def spouts(self) -> list[str]:
        return sorted(c for c, s in self.specs.items() if s.is_spout)

    @property
    def bolts_in_order(self) -> list[str]:
        """Bolt ids in topological order (by level, then id): the order a wave runs them."""
        return sorted((c for c, s in self.specs.items() if not s.is_spout), key=lambda c: (self.levels[c], c))

    def fields(self, component: str, stream: str) -> tuple[str, ...]:
        return self.specs[component].streams[stream].fields


def _check_fixed_attributes(component: str, bolt: Any) -> None:
    """`fixed_attributes` is a tuple of attribute names, not one string (engine/tasks/fixed_parts.py)."""
    names = getattr(type(user_instance(bolt)), "fixed_attributes", ())  # inside a windowed or stateful executor
    if isinstance(names, str) or not isinstance(names, (tuple, list, frozenset, set)) or \
            not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise InvalidTopologyException(
            f"bolt {component!r}: fixed_attributes must be a tuple of attribute names, like ('table',), got {names!r}")
