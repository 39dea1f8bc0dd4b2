"""streamparse's API on squall: a streamparse project runs with one changed import line,
`from streamparse import ...` -> `from squall.streamparse import ...`.

`Topology` classes with `X.spec(...)` attributes, `Grouping`, `Stream`; pystorm's `Spout`,
`ReliableSpout`, `Bolt`, `BatchingBolt`, `TicklessBatchingBolt` and `Tuple`. They are squall
spouts and bolts, so they run on both engines with Storm's guarantees. Java and shell
components and thrift submission need a Storm cluster: they are refused with what to use.
"""

from squall.streamparse.batching import BatchingBolt, TicklessBatchingBolt
from squall.streamparse.components import Bolt, Component, ReliableSpout, Spout, StormHandler, Tuple
from squall.streamparse.specs import ComponentSpec, Grouping, Stream, StreamId
from squall.streamparse.topology import Topology
from squall.streamparse.unsupported import JavaBolt, JavaSpout, ShellBolt, ShellSpout, UnsupportedFeature

__all__ = [
    "BatchingBolt",
    "Bolt",
    "Component",
    "ComponentSpec",
    "Grouping",
    "JavaBolt",
    "JavaSpout",
    "ReliableSpout",
    "ShellBolt",
    "ShellSpout",
    "Spout",
    "StormHandler",
    "Stream",
    "StreamId",
    "TicklessBatchingBolt",
    "Topology",
    "Tuple",
    "UnsupportedFeature",
]
