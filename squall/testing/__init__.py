"""Testing helpers, as in Storm's `org.apache.storm.testing`."""

from squall.testing.complete import CompleteTopologyResult, FixedTupleSpout, complete_topology
from squall.testing.feeder import AckFailMapTracker, AckTracker, FeederSpout

__all__ = [
    "AckFailMapTracker",
    "AckTracker",
    "CompleteTopologyResult",
    "FeederSpout",
    "FixedTupleSpout",
    "complete_topology",
]
