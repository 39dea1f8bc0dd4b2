"""ColumnarCollector: what a columnar bolt's `execute_batch` emits and fails, recorded and
checked (the task computes ids, acks and targets for the whole batch afterwards)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from squall.api.columns import declared_columns
from squall.api.streams import StreamOut

_I64 = np.int64


class BatchEmit(NamedTuple):
    """One emit_batch: the stream, its rows, each row's input row (None: unanchored) and, for
    emit_direct_batch, each row's task."""

    so: StreamOut
    data: Any  # pyarrow.RecordBatch with the declared fields
    anchors: np.ndarray | None
    tasks: Any = None


class ColumnarCollector:
    """A columnar bolt's collector: `emit_batch`, `emit_direct_batch`, `fail_rows`, `report_error`."""

    def __init__(self, component: str, streams: dict[str, StreamOut], runner: Any):
        self._component = component
        self._streams = streams
        self._runner = runner
        self.emits: list[BatchEmit] = []
        self.failed = np.zeros(0, bool)
        self.source_component = ""  # the input batch's source (set by the task before execute_batch)
        self.source_stream = ""

    def begin(self, n_rows: int, source_component: str, source_stream: str) -> None:
        self.emits = []
        self.failed = np.zeros(n_rows, bool)
        self.source_component, self.source_stream = source_component, source_stream

    def _anchors(self, anchors: Any, n_out: int, what: str) -> np.ndarray | None:
        if anchors is None:
            return None
        a = np.asarray(anchors)
        if a.ndim != 1 or (len(a) and a.dtype.kind not in "iu"):
            raise TypeError(f"columnar bolt {self._component!r}: {what} anchors must be a 1-d array of input row "
                            f"indices (integers), got {a.dtype} of shape {a.shape}")
        if len(a) != n_out:
            raise ValueError(f"columnar bolt {self._component!r}: {what} got {len(a)} anchor(s) for {n_out} output "
                             "row(s); give one input row index per output row (anchors[i] = the input row of "
                             "output row i), or anchors=None for unanchored rows")
        n_in = len(self.failed)
        if len(a) and (a.min() < 0 or a.max() >= n_in):
            bad = int(a.min()) if a.min() < 0 else int(a.max())
            raise IndexError(f"columnar bolt {self._component!r}: {what} anchors an output row to input row {bad}, "
                             f"but the input batch has {n_in} row(s) (0..{n_in - 1})")
        return a.astype(_I64, copy=False)

    def emit_batch(self, columns: Any, anchors: Any = None, stream: str = "default") -> None:
        """Emit many rows at once; `anchors[i]` is the input row that output row i is anchored to."""
        so, data = declared_columns(self._streams, self._component, stream, columns,
                                    f"columnar bolt {self._component!r}: stream {stream!r} is declared direct; use "
                                    "emit_direct_batch(tasks, columns, anchors, stream)")
        a = self._anchors(anchors, data.num_rows, "emit_batch")
        self.emits.append(BatchEmit(so, data, a))

    def emit_direct_batch(self, tasks: Any, columns: Any, anchors: Any = None, stream: str = "default") -> None:
        """Emit rows on a direct stream: `tasks[i]` is the task output row i goes to."""
        so, data = declared_columns(self._streams, self._component, stream, columns)
        if not so.direct:
            raise ValueError(f"columnar bolt {self._component!r}: emit_direct_batch on stream {stream!r}, which is "
                             f"not declared direct (declare(..., stream={stream!r}, direct=True))")
        a = self._anchors(anchors, data.num_rows, "emit_direct_batch")
        self.emits.append(BatchEmit(so, data, a, tasks))

    def fail_rows(self, rows: Any) -> None:
        """Fail these input rows (int indices or a bool mask over the batch): their trees fail."""
        r = np.asarray(rows)
        n = len(self.failed)
        if r.dtype == bool:
            if r.shape != (n,):
                raise ValueError(f"columnar bolt {self._component!r}: fail_rows got a bool mask of shape {r.shape} "
                                 f"for a batch of {n} row(s); the mask needs one entry per input row")
            self.failed |= r
            return
        r = r.reshape(-1)
        if len(r) and r.dtype.kind not in "iu":
            raise TypeError(f"columnar bolt {self._component!r}: fail_rows takes input row indices or a bool mask, "
                            f"got {r.dtype}")
        if len(r) and (r.min() < 0 or r.max() >= n):
            bad = int(r.min()) if r.min() < 0 else int(r.max())
            raise IndexError(f"columnar bolt {self._component!r}: fail_rows got row {bad}, but the input batch has "
                             f"{n} row(s) (0..{n - 1})")
        self.failed[r.astype(_I64)] = True

    def take(self) -> tuple[list[BatchEmit], np.ndarray]:
        emits, failed = self.emits, self.failed
        self.emits, self.failed = [], np.zeros(0, bool)
        return emits, failed

    def report_error(self, error: BaseException | str) -> None:
        self._runner.report_error(error)

    def __reduce__(self) -> tuple:  # a bolt that keeps its collector pickles without it
        return (_none, ())


def _none() -> None:
    return None
