"""`from streamparse.dsl import Topology, Stream, ...` (streamparse's module path) works here too."""

from squall.streamparse.specs import ComponentSpec, Grouping, Stream, StreamId
from squall.streamparse.topology import Topology

__all__ = ["ComponentSpec", "Grouping", "Stream", "StreamId", "Topology"]
