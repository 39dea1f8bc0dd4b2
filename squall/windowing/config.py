"""Window lengths and intervals (Storm's BaseWindowedBolt.Count and .Duration) and the checks a
window configuration gets when the topology is built and submitted."""

from __future__ import annotations

import math
from dataclasses import dataclass

from squall.api.components import InvalidTopologyException


@dataclass(frozen=True)
class Count:
    """A window length or sliding interval in tuples."""

    value: int

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int) or self.value < 1:
            raise ValueError(f"Count needs a whole number of tuples >= 1, got {self.value!r}")


@dataclass(frozen=True)
class Duration:
    """A window length, sliding interval, lag or watermark interval in seconds (`.millis` in ms)."""

    secs: float

    def __post_init__(self) -> None:
        if isinstance(self.secs, bool) or not isinstance(self.secs, (int, float)) or not math.isfinite(self.secs) \
                or self.secs < 0:
            raise ValueError(f"Duration needs a number of seconds >= 0, got {self.secs!r}")

    @property
    def millis(self) -> int:
        return int(round(self.secs * 1000))

    @classmethod
    def seconds(cls, n: float) -> Duration:
        return cls(n)

    @classmethod
    def milliseconds(cls, n: float) -> Duration:
        return cls(n / 1000)

    @classmethod
    def minutes(cls, n: float) -> Duration:
        return cls(n * 60)


@dataclass
class WindowSpec:
    """What `with_*` set on a windowed bolt: checked by `check` once its component id is known."""

    length: Count | Duration | None = None
    interval: Count | Duration | None = None
    timestamp_field: str | None = None
    lag: Duration = Duration(0)
    watermark_interval: Duration = Duration(1)
    late_stream: str | None = None

    @property
    def event_time(self) -> bool:
        return self.timestamp_field is not None

    def check(self, component: str) -> None:
        """Raise InvalidTopologyException naming the component when the window cannot work."""
        where = f"windowed bolt {component!r}"
        if self.length is None:
            raise InvalidTopologyException(
                f"{where}: no window set; call with_window(...) or with_tumbling_window(...)")
        for what, v in (("window length", self.length), ("sliding interval", self.interval)):
            if not isinstance(v, (Count, Duration)):
                raise InvalidTopologyException(f"{where}: the {what} must be Count(n) or Duration(secs), got {v!r}")
        if type(self.length) is type(self.interval) and _size(self.length) < _size(self.interval):
            raise InvalidTopologyException(
                f"{where}: the window ({_show(self.length)}) is shorter than its sliding interval "
                f"({_show(self.interval)}), so tuples between windows would never be processed; use a window at "
                "least as long as the interval (equal: a tumbling window)")
        if isinstance(self.length, Duration) and self.length.millis <= 0 or \
                isinstance(self.interval, Duration) and self.interval.millis <= 0:
            raise InvalidTopologyException(f"{where}: window length and sliding interval must be > 0 ms")
        if self.event_time and not (isinstance(self.length, Duration) and isinstance(self.interval, Duration)):
            raise InvalidTopologyException(
                f"{where}: event-time windows (with_timestamp_field) are time windows here: use Duration for the "
                "length and the sliding interval (event-time count windows are not supported yet)")
        if self.late_stream is not None and not self.event_time:
            raise InvalidTopologyException(
                f"{where}: with_late_tuple_stream needs event time (with_timestamp_field): only then can a tuple "
                "be late")
        if self.watermark_interval.millis <= 0:
            raise InvalidTopologyException(f"{where}: the watermark interval must be > 0 ms")

    def check_conf(self, component: str, conf: dict, spout_tasks: int | None = None) -> None:
        """Storm's submit-time checks: a window must fit in the message timeout (its tuples are
        held that long), and a count window fed straight by spouts (`spout_tasks` of them) must
        fit in what they may have pending, else it never fills."""
        where = f"windowed bolt {component!r}"
        timeout = conf.get("topology.message.timeout.secs", 30)
        if conf.get("topology.enable.message.timeouts", True) and timeout is not None:
            ms = sum(v.millis for v in (self.length, self.interval) if isinstance(v, Duration))
            if ms > float(timeout) * 1000:
                raise InvalidTopologyException(
                    f"{where}: window length + sliding interval = {ms / 1000:g} s exceeds "
                    f"topology.message.timeout.secs = {timeout:g} s, so its tuples would time out while held; "
                    "raise the timeout or shorten the window")
        pending = conf.get("topology.max.spout.pending")
        counts = sum(v.value for v in (self.length, self.interval) if isinstance(v, Count))
        if pending and spout_tasks and counts > int(pending) * spout_tasks:
            raise InvalidTopologyException(
                f"{where}: window length + sliding interval = {counts} tuples exceeds what its {spout_tasks} spout "
                f"task(s) may have pending (topology.max.spout.pending = {pending} each), so the window could never "
                "fill; raise max spout pending or shorten the window")


def _size(v: Count | Duration) -> float:
    return v.value if isinstance(v, Count) else v.millis


def _show(v: Count | Duration) -> str:
    return f"Count({v.value})" if isinstance(v, Count) else f"Duration({v.secs:g} s)"
