"""BaseWindowedBolt: what users subclass for windows (Storm's BaseWindowedBolt). The builder
wraps it in a WindowedBoltExecutor (squall.windowing.executor), which holds the window's tuples,
fires windows, anchors and acks; the user's `execute` sees one TupleWindow per window."""

from __future__ import annotations

from typing import Any

from squall.api.components import Component
from squall.windowing.config import Count, Duration, WindowSpec


def _length(v: Any, what: str) -> Count | Duration:
    if not isinstance(v, (Count, Duration)):
        raise TypeError(f"{what} must be squall.windowing.Count(n) or Duration(secs), got {v!r}")
    return v


class BaseWindowedBolt(Component):
    """Subclass and define `execute(self, window)`; configure with the chainable `with_*`
    methods before `set_bolt`. Emits in `execute` are anchored to every tuple of the window, and
    each tuple is acked when no later window can contain it: do not ack or fail them yourself."""

    def _run_by(self, component_id: str) -> Component:
        from squall.windowing.executor import WindowedBoltExecutor  # noqa: PLC0415 - it builds on this module

        return WindowedBoltExecutor(self, component_id)  # an executor that holds the windows (as Storm)

    _window: WindowSpec | None = None

    @property
    def window_spec(self) -> WindowSpec:
        if self._window is None:
            self._window = WindowSpec()
        return self._window

    def prepare(self, conf: dict, context: Any, collector: Any) -> None: ...

    def execute(self, window: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define execute(self, window)")

    def cleanup(self) -> None: ...

    # -- configuration (Storm's withWindow & co.) ---------------------------------------

    def with_window(self, length: Count | Duration, sliding_interval: Count | Duration | None = None
                    ) -> BaseWindowedBolt:
        """A sliding window of `length`, fired every `sliding_interval` (default, as Storm: every
        tuple, `Count(1)`, for Count and Duration windows alike)."""
        spec = self.window_spec
        spec.length = _length(length, "the window length")
        if sliding_interval is None:
            sliding_interval = Count(1)
        spec.interval = _length(sliding_interval, "the sliding interval")
        return self

    def with_tumbling_window(self, length: Count | Duration) -> BaseWindowedBolt:
        return self.with_window(length, length)

    def with_timestamp_field(self, name: str) -> BaseWindowedBolt:
        """Event time: each tuple's time is this field (ms since the epoch)."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"with_timestamp_field takes a field name, got {name!r}")
        self.window_spec.timestamp_field = name
        return self

    def with_lag(self, duration: Duration) -> BaseWindowedBolt:
        """How far out of order event times may arrive (the watermark trails the newest time by it)."""
        self.window_spec.lag = _duration(duration, "with_lag")
        return self

    def with_watermark_interval(self, duration: Duration) -> BaseWindowedBolt:
        """How often (processing time) a watermark is computed; windows fire on watermarks."""
        self.window_spec.watermark_interval = _duration(duration, "with_watermark_interval")
        return self

    def with_late_tuple_stream(self, stream: str) -> BaseWindowedBolt:
        """Late tuples (event time older than the last watermark) are emitted on `stream`, with
        the input's fields, instead of being dropped. Either way they are acked."""
        if not isinstance(stream, str) or not stream:
            raise TypeError(f"with_late_tuple_stream takes a stream name, got {stream!r}")
        self.window_spec.late_stream = stream
        return self


def _duration(v: Any, what: str) -> Duration:
    if not isinstance(v, Duration):
        raise TypeError(f"{what} takes a squall.windowing.Duration, got {v!r}")
    return v
