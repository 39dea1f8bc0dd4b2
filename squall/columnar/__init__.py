"""Columnar bolts: a bolt that gets a whole Arrow batch per task and input stream each wave,
emits whole batches anchored row by row, and keeps Storm's per-tuple replay."""

from squall.columnar.bolt import ColumnarBolt
from squall.columnar.collector import ColumnarCollector

__all__ = ["ColumnarBolt", "ColumnarCollector"]
