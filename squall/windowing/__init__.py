"""Windowed bolts (Storm's BaseWindowedBolt): count and time windows, sliding and tumbling, in
processing time or event time, with Storm's reliability (emits anchored to the window's tuples,
each tuple acked when it has left every window)."""

from squall.windowing.bolt import BaseWindowedBolt
from squall.windowing.config import Count, Duration
from squall.windowing.window import TupleWindow

__all__ = ["BaseWindowedBolt", "Count", "Duration", "TupleWindow"]
