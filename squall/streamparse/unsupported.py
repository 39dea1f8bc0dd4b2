"""What streamparse runs through a Storm cluster and squall cannot: Java and shell
components, thrift/Flux submission. Each is a clear error naming the component and what to
use instead, raised when the Topology class is made (or the method is called)."""

from __future__ import annotations

from typing import Any

from squall.streamparse.specs import ComponentSpec


class UnsupportedFeature(NotImplementedError):
    """A streamparse feature that needs a JVM Storm cluster."""


_ALTERNATIVES = {
    "JavaBolt": "port it to Python as a squall.streamparse.Bolt (process(tup)); for a Kafka writer "
                "squall.connectors.kafka.KafkaBolt",
    "JavaSpout": "port it to Python as a squall.streamparse.Spout (next_tuple()); for brokers use squall.connectors "
                 "(Kafka, RabbitMQ, Redis Streams, NATS JetStream spouts)",
    "ShellBolt": "write it as a squall.streamparse.Bolt subclass (process(tup)); to reuse the program, call it "
                 "from process() with subprocess",
    "ShellSpout": "write it as a squall.streamparse.Spout subclass (next_tuple()); to reuse the program, read "
                  "its output from next_tuple()",
}


class UnsupportedSpec(ComponentSpec):
    """A Java or shell component's spec: kept until the Topology class names it, then refused."""

    def __init__(self, component_cls: type, kind: str, what: str, name: str | None = None, inputs: Any = None,
                 par: Any = 1, config: dict | None = None, outputs: Any = None):
        super().__init__(component_cls, name=name, inputs=inputs, par=par if par is not None else 1, config=config,
                         outputs=outputs)
        self.kind, self.what = kind, what

    @property
    def is_spout(self) -> bool:
        return self.kind.endswith("Spout")

    def refuse(self) -> None:
        raise UnsupportedFeature(
            f"component {self.name!r} is a {self.kind} ({self.what}): squall runs Python components in-process, "
            f"there is no Storm worker to start it. Instead, {_ALTERNATIVES[self.kind]}.")


class _Unsupported:
    """JavaBolt, JavaSpout, ShellBolt, ShellSpout: `spec()` accepts streamparse's arguments."""

    kind = ""

    @classmethod
    def spec(cls, name: str | None = None, serialized_java: bytes | None = None, full_class_name: str | None = None,
             args_list: list | None = None, command: str | None = None, script: str | None = None,
             inputs: Any = None, par: Any = 1, config: dict | None = None, outputs: Any = None) -> UnsupportedSpec:
        if cls.kind.startswith("Java"):
            what = f"Java class {full_class_name}" if full_class_name else "serialized Java"
        else:
            what = f"runs `{command} {script or ''}`".rstrip() + " through Storm's multilang protocol"
        return UnsupportedSpec(cls, cls.kind, what, name=name, inputs=inputs, par=par, config=config,
                               outputs=outputs)


class JavaBolt(_Unsupported):
    kind = "JavaBolt"


class JavaSpout(_Unsupported):
    kind = "JavaSpout"


class ShellBolt(_Unsupported):
    kind = "ShellBolt"


class ShellSpout(_Unsupported):
    kind = "ShellSpout"


def thrift_error(what: str) -> UnsupportedFeature:
    return UnsupportedFeature(
        f"{what}: squall does not submit topologies to Nimbus (thrift) or write Flux files; it runs them itself. "
        "Run it with `squall run topologies/<file>.py` (from the project folder, or with --path src), or in Python: "
        "`with LocalCluster() as c: c.submit_topology(name, conf, YourTopology)`.")
