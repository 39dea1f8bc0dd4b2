"""streamparse's `Topology` class: specs as class attributes, checked when the class is made
(as streamparse does), compiled to a squall StormTopology by `build()`. Thrift and Flux
(submission to a Storm cluster) are not there: squall runs the topology itself."""

from __future__ import annotations

from typing import Any

from squall.api.topology import StormTopology, TopologyBuilder
from squall.streamparse.components import Component
from squall.streamparse.specs import ComponentSpec, StreamId
from squall.streamparse.unsupported import UnsupportedSpec, thrift_error


class TopologyType(type):
    """Checks a Topology class as streamparse does, when the class is made."""

    def __new__(mcs, classname: str, bases: tuple, class_dict: dict) -> TopologyType:
        specs = mcs.class_dict_to_specs(class_dict)
        spouts = 0
        for spec in specs.values():
            if isinstance(spec, UnsupportedSpec):
                spec.refuse()
            if spec.is_spout:
                spouts += 1
                if spec.inputs:
                    raise ValueError(f'{spec.component_cls.__name__} "{spec.name}" is a Spout: it cannot have inputs')
                if not spec.outputs:
                    raise ValueError(f'{spec.component_cls.__name__} "{spec.name}" requires at least one output, '
                                     "because it is a Spout")
            elif not spec.inputs:
                raise ValueError(f'{spec.component_cls.__name__} "{spec.name}" requires at least one input, because '
                                 "it is a Bolt.")
            mcs.clean_spec_inputs(spec, specs)
        if classname != "Topology" and not spouts:
            raise ValueError("A Topology requires at least one Spout")
        config = class_dict.setdefault("config", {})
        if not isinstance(config, dict):
            raise TypeError(f"Topology config must be a dictionary. Given: {config!r}")
        class_dict["specs"] = list(specs.values())
        return type.__new__(mcs, classname, bases, class_dict)

    @staticmethod
    def class_dict_to_specs(class_dict: dict) -> dict[str, ComponentSpec]:
        """The ComponentSpec attributes, named after their attribute unless given a name."""
        specs: dict[str, ComponentSpec] = {}
        for attr, spec in class_dict.items():
            if isinstance(spec, ComponentSpec):
                if spec.name is None:
                    spec.name = attr
                if spec.name in specs:
                    raise ValueError(f"Duplicate component name: {spec.name}")
                specs[spec.name] = spec
            elif isinstance(spec, Component) or (isinstance(spec, type) and issubclass(spec, Component)):
                raise TypeError("Topology classes should have ComponentSpec attributes.  Did you forget to call the "
                                f"spec class method for your component?  Given: {spec!r}")
        return specs

    @staticmethod
    def clean_spec_inputs(spec: ComponentSpec, specs: dict[str, ComponentSpec]) -> None:
        """Inputs by name; each must be a component of this topology with that stream and fields."""
        for sid, grouping in spec.inputs.items():
            if isinstance(sid.component, ComponentSpec):
                if sid.component.name is None or specs.get(sid.component.name) is not sid.component:
                    raise KeyError(f"{spec.name!r} has an input that is not part of this topology: "
                                   f"{sid.component!r}; assign that spec to an attribute of the Topology class too")
                sid.component = sid.component.name
            source = specs.get(sid.component)
            if source is None:
                raise KeyError(f"{spec.name!r} has an input from unknown component {sid.component!r}; "
                               f"components: {sorted(specs)}")
            stream = source.outputs.get(sid.stream)
            if stream is None:
                raise KeyError(f"{spec.name!r} subscribes to stream {sid.stream!r} of {source.name!r}, which "
                               f"declares only {list(source.outputs)}")
            for field in grouping.fields:
                if field not in stream.fields:
                    raise ValueError(f"Field {field!r} specified in grouping is not a valid output field for the "
                                     f"{source.name!r} {sid.stream!r} stream.")

    def __getattr__(cls, name: str) -> Any:
        if name in ("thrift_topology", "thrift_bolts", "thrift_spouts"):
            raise thrift_error(f"{cls.__name__}.{name}")
        raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")


def _subscribe(declarer: Any, sid: StreamId, grouping: Any) -> None:
    source, stream = sid.component_name, sid.stream
    if grouping.kind == "fields":
        declarer.fields_grouping(source, list(grouping.fields), stream=stream)
    else:
        getattr(declarer, f"{grouping.kind}_grouping")(source, stream=stream)


def _parallelism(spec: ComponentSpec) -> int:
    if isinstance(spec.par, dict):
        raise TypeError(
            f"component {spec.name!r}: par={spec.par!r} picks a parallelism per `sparse -e` environment; squall has "
            "no environments: give an int (e.g. par=2)")
    return spec.par


class Topology(metaclass=TopologyType):
    """A streamparse topology: subclass it with `X.spec(...)` class attributes and a `config` dict."""

    config: dict = {}
    specs: list[ComponentSpec] = []

    @classmethod
    def build(cls) -> StormTopology:
        """The squall topology: every spec a component with its class's instance, parallelism,
        config (as add_configuration) and inputs."""
        builder = TopologyBuilder()
        for spec in cls.specs:
            obj = spec.component_cls()
            obj.outputs = list(spec.outputs.values())  # what the spec said, even if not the class default
            if spec.is_spout:
                declarer = builder.set_spout(spec.name, obj, _parallelism(spec))
            else:
                declarer = builder.set_bolt(spec.name, obj, _parallelism(spec))
                for sid, grouping in spec.inputs.items():
                    _subscribe(declarer, sid, grouping)
            for key, value in spec.config.items():
                declarer.add_configuration(key, value)
        return builder.create_topology()

    @classmethod
    def build_conf(cls) -> dict:
        """The topology-level `config`: what `submit_topology`'s conf is laid over."""
        return dict(cls.config)

    @classmethod
    def write(cls, stream: Any) -> None:
        raise thrift_error(f"{cls.__name__}.write()")

    @classmethod
    def read(cls, stream: Any) -> None:
        raise thrift_error(f"{cls.__name__}.read()")

    @classmethod
    def to_flux_dict(cls, name: str) -> dict:
        raise thrift_error(f"{cls.__name__}.to_flux_dict()")
