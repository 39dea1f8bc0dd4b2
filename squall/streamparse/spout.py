"""`from streamparse.spout import Spout` (streamparse's older module path) works here too."""

from squall.streamparse.components import ReliableSpout, Spout
from squall.streamparse.unsupported import JavaSpout, ShellSpout

__all__ = ["JavaSpout", "ReliableSpout", "ShellSpout", "Spout"]
