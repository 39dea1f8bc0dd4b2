"""squall: Apache Storm's guaranteed message processing in Python, with Spark as the engine."""

from squall.api.basic_bolt import BasicOutputCollector
from squall.api.collectors import OutputCollector
from squall.api.components import (
    BasicBolt,
    Bolt,
    FailedException,
    InvalidTopologyException,
    ReportedFailedException,
    Spout,
)
from squall.api.config import Config
from squall.api.context import TopologyContext
from squall.api.spout_collector import SpoutOutputCollector
from squall.api.ticks import is_tick
from squall.api.topology import OutputFieldsDeclarer, StormTopology, TopologyBuilder
from squall.engine.cluster import LocalCluster
from squall.observe.errors import ErrorRecord
from squall.reliability.pending import FailReason
from squall.reliability.tuple import Tuple
from squall.version import __version__ as __version__

__all__ = [
    "BasicBolt",
    "BasicOutputCollector",
    "Bolt",
    "Config",
    "ErrorRecord",
    "FailReason",
    "FailedException",
    "InvalidTopologyException",
    "LocalCluster",
    "OutputCollector",
    "OutputFieldsDeclarer",
    "ReportedFailedException",
    "Spout",
    "SpoutOutputCollector",
    "StormTopology",
    "TopologyBuilder",
    "TopologyContext",
    "Tuple",
    "is_tick",
]
