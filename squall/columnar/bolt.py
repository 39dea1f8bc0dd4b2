"""The user-facing base class of a columnar bolt."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from squall.api.context import TopologyContext
    from squall.columnar.collector import ColumnarCollector

from squall.api.components import Component


class ColumnarBolt(Component):
    """A bolt that processes a `pyarrow.RecordBatch` at a time (one row per input tuple).

    `execute_batch` is called once per task, wave and input stream with every row that arrived;
    emit with `collector.emit_batch(columns, anchors)`, where `anchors[i]` is the input row
    output row i is anchored to. Every input row not failed with `collector.fail_rows` is acked
    when `execute_batch` returns; if it raises, every row of the batch fails.
    """

    _bolt_kind = "columnar"
    _settles_inputs = True  # every input row is acked or failed when execute_batch returns

    def prepare(self, conf: dict, context: TopologyContext) -> None: ...

    def execute_batch(self, batch: pa.RecordBatch, collector: ColumnarCollector) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define execute_batch(self, batch, collector)")

    def cleanup(self) -> None: ...
