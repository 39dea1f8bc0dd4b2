"""`from streamparse.bolt import Bolt` (streamparse's older module path) works here too."""

from squall.streamparse.batching import BatchingBolt, TicklessBatchingBolt
from squall.streamparse.components import Bolt
from squall.streamparse.unsupported import JavaBolt, ShellBolt

__all__ = ["BatchingBolt", "Bolt", "JavaBolt", "ShellBolt", "TicklessBatchingBolt"]
