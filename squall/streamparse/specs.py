"""streamparse's topology DSL: `Stream`, `Grouping` and component specs, as streamparse
defines them (same names, arguments and checks), compiled to squall's TopologyBuilder
(`from streamparse.dsl import ...` is dsl.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Stream:
    """An output stream: its fields, name and whether it is direct (streamparse's Stream)."""

    def __init__(self, fields: list[str] | tuple[str, ...] | None = None, name: str = "default",
                 direct: bool = False):
        if fields is None:
            fields = []
        elif isinstance(fields, (list, tuple)):
            fields = list(fields)
            for f in fields:
                if not isinstance(f, str):
                    raise TypeError(f"All field names must be strings; given: {f!r}")
        else:
            raise TypeError(f"Stream fields must be a list, tuple, or None; given: {fields!r}")
        if not isinstance(name, str):
            raise TypeError(f"Stream name must be a string; given: {name!r}")
        if not isinstance(direct, bool):
            raise TypeError(f'"direct" must be either True or False; given: {direct!r}')
        self.fields, self.name, self.direct = fields, name, direct

    def __repr__(self) -> str:
        return f"Stream({self.fields!r}, name={self.name!r}, direct={self.direct!r})"


@dataclass(frozen=True)
class _Grouping:
    """One grouping; `fields == ()` with kind "fields" is streamparse's GLOBAL."""

    kind: str
    fields: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"fields({list(self.fields)!r})" if self.kind == "fields" else self.kind.upper()


class Grouping:
    """How a stream's tuples are spread over a bolt's tasks (streamparse's Grouping)."""

    __slots__ = ()

    SHUFFLE = _Grouping("shuffle")
    GLOBAL = _Grouping("global")
    DIRECT = _Grouping("direct")
    ALL = _Grouping("all")
    NONE = _Grouping("none")
    LOCAL_OR_SHUFFLE = _Grouping("local_or_shuffle")

    @classmethod
    def fields(cls, *fields: Any) -> _Grouping:
        """Tuples with equal values in `fields` go to the same task."""
        names = list(fields[0]) if len(fields) == 1 and isinstance(fields[0], list) else list(fields)
        if not names:
            raise ValueError("List cannot be empty for fields grouping")
        return _Grouping("fields", tuple(names))

    @classmethod
    def custom_object(cls, java_class_name: str, arg_list: list) -> _Grouping:
        raise NotImplementedError(
            f"Grouping.custom_object({java_class_name!r}, ...) needs a Java class in a Storm worker; squall runs "
            "Python only: use Grouping.fields(...) (or DIRECT with emit(..., direct_task=...) to pick tasks yourself)")

    @classmethod
    def custom_serialized(cls, java_serialized: bytes) -> _Grouping:
        raise NotImplementedError(
            "Grouping.custom_serialized needs a serialized Java grouping in a Storm worker; squall runs Python only: "
            "use Grouping.fields(...) or DIRECT")


@dataclass(eq=False)
class StreamId:
    """A component's stream as an input (streamparse's GlobalStreamId): `spec["stream"]`."""

    component: Any  # a ComponentSpec, or its name once the topology class is made
    stream: str = "default"

    @property
    def component_name(self) -> str:
        return self.component if isinstance(self.component, str) else self.component.name


def _outputs(component_cls: type, outputs: Any) -> dict[str, Stream]:
    """Output streams from a list of field names (the default stream) and/or Streams."""
    if outputs is None:
        outputs = getattr(component_cls, "outputs", None) or []
    if not isinstance(outputs, (list, tuple)):
        raise TypeError(f"Outputs must either be a list of strings or a list of Streams.  Given: {outputs!r}")
    streams: dict[str, Stream] = {}
    for out in outputs:
        if isinstance(out, Stream):
            streams[out.name] = out
        elif isinstance(out, str):
            streams.setdefault("default", Stream([])).fields.append(out)
        else:
            raise TypeError(f"Outputs must either be a list of strings or a list of Streams.  Invalid entry: {out!r}")
    return streams


def _par(component_cls: type, par: Any) -> Any:
    if par is None:
        par = getattr(component_cls, "par", 1)
    if isinstance(par, dict):
        for stage, hint in par.items():
            if not (isinstance(stage, str) and isinstance(hint, int)):
                raise TypeError("If par is a dict, it must map from environment names to integers specifying the "
                                f"parallelism hint for the component.\nGiven stage: {stage!r}\nGiven parallelism "
                                f"hint: {hint!r}")
            if hint < 1:
                raise ValueError(f"Parallelism hint for stage {stage} must be an integer greater than 0. Given: {hint}")
    elif isinstance(par, bool) or not isinstance(par, int):
        raise TypeError(f"Parallelism hint must be an integer greater than 0. Given: {par!r}")
    elif par < 1:
        raise ValueError(f"Parallelism hint must be an integer greater than 0. Given: {par}")
    return par


def _config(component_cls: type, config: Any) -> dict:
    if config is None:
        config = getattr(component_cls, "config", None)
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise TypeError(f"Config must either be a dict or None.  Given: {config!r}")
    return dict(config)


class ComponentSpec:
    """A component in a Topology class: its class, name, inputs, parallelism, config, outputs."""

    def __init__(self, component_cls: type, name: str | None = None, inputs: Any = None, par: Any = 1,
                 config: dict | None = None, outputs: Any = None):
        self.component_cls = component_cls
        self.name = name
        self.par = _par(component_cls, par)
        self.config = _config(component_cls, config)
        self.outputs = _outputs(component_cls, outputs)
        self.inputs = self._inputs(inputs)

    @property
    def is_spout(self) -> bool:
        from squall.api.components import Spout  # noqa: PLC0415 - the DSL itself needs no engine

        return issubclass(self.component_cls, Spout)

    @staticmethod
    def _inputs(inputs: Any) -> dict[StreamId, _Grouping]:
        """streamparse's forms: a dict {spec or spec["stream"]: Grouping}, or a list (shuffle;
        direct when the spec's default stream is direct), or one spec."""
        if isinstance(inputs, dict):
            out = {}
            for key, val in inputs.items():
                if isinstance(key, ComponentSpec):
                    key = key["default"]
                if not isinstance(key, StreamId) or not isinstance(val, _Grouping):
                    raise TypeError("If inputs is a dict, it is expected to map from GlobalStreamId or ComponentSpec "
                                    f"objects to Grouping objects.  Given key: {key!r}; Given value: {val!r}")
                out[key] = val
            return out
        if isinstance(inputs, ComponentSpec):
            inputs = [inputs]
        if inputs is None:
            return {}
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"Inputs must either be a list, dict, or None.  Given: {inputs!r}")
        out = {}
        for item in inputs:
            if isinstance(item, ComponentSpec):
                default = item.outputs.get("default")
                out[StreamId(item)] = Grouping.DIRECT if default is not None and default.direct else Grouping.SHUFFLE
            elif isinstance(item, StreamId):
                out[item] = Grouping.SHUFFLE
            else:
                raise TypeError(f"Inputs must be ComponentSpec or GlobalStreamId objects.  Given: {item!r}")
        return out

    def __getitem__(self, stream: str) -> StreamId:
        if stream not in self.outputs:
            raise KeyError(f"Invalid stream for {self.name}: {stream!r}. Valid streams are: {list(self.outputs)}")
        return StreamId(self.name or self, stream)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.component_cls.__name__}, name={self.name!r}, par={self.par!r}, "
                f"inputs={ {f'{k.component_name}:{k.stream}': v for k, v in self.inputs.items()} !r})")
