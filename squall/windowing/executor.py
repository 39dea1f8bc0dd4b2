"""WindowedBoltExecutor: runs a BaseWindowedBolt as a Bolt (Storm's WindowedBoltExecutor).

It holds every input in a HeldStore (columns, not Tuple objects), fires windows from tuple
arrivals and from the end of each wave (`finish_wave`), on the topology clock that reaches the
task as `context.wave_time` (so `LocalCluster(simulated_time=True)` fires time windows when
`advance_time` has moved the clock and the bolt runs again), anchors the window's emits to all
its tuples, and acks each tuple as soon as no later window can contain it.
"""

from __future__ import annotations

import logging
import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from squall.api.components import Bolt, InvalidTopologyException
from squall.api.config import Config
from squall.reliability.batch import TupleBatch
from squall.reliability.held import HeldStore
from squall.reliability.pending import FailReason
from squall.reliability.tuple import Tuple, tuples_of
from squall.windowing.collector import WindowedOutputCollector
from squall.windowing.config import Count, Duration
from squall.windowing.policies import align_up, earliest_after, retired, skip_empty_dues, window_and_expired
from squall.windowing.window import TupleWindow

if TYPE_CHECKING:
    from squall.windowing.bolt import BaseWindowedBolt

log = logging.getLogger("squall.windowing")

LATE_LOG_EVERY = 1000  # without a late stream, the first late tuple and then every this many are logged
IN_LAST = 1  # store flag bit: the row was in the last window (get_new is the rest)


class WindowedBoltExecutor(Bolt):
    """The Bolt the builder runs in place of a BaseWindowedBolt; see the module docstring."""

    WRAPS = "bolt"  # where the user's bolt is (api/components.user_instance)
    _settles_inputs = False  # it holds its inputs in windows (HeldStore rows), not as Tuples

    def __init__(self, bolt: BaseWindowedBolt, component: str):
        spec = bolt.window_spec
        spec.check(component)
        self.bolt = bolt
        self.spec = spec
        self.component = component
        self.store = HeldStore()
        self.current: TupleWindow | None = None
        self.count = 0  # tuples held so far (their arrival numbers)
        self.fired_count = 0  # `count` at the last count trigger
        self.next_ref: int | None = None  # ms: the next time trigger (processing) or window end (event time)
        self.stream_ts: dict[tuple[str, str], int] = {}  # event time: newest timestamp per input stream
        self.watermark: int | None = None
        self.late_dropped = 0  # late tuples with no late stream to go to
        self.next_watermark_at: float | None = None  # wave time (secs) of the next watermark
        self.spout_tasks: int | None = None  # spout tasks feeding it, when only spouts do
        # processing time with a count trigger: fire every this many tuples (0: another kind)
        self._count_every = 0 if spec.event_time or not isinstance(spec.interval, Count) else spec.interval.value
        self._wave_secs, self._wave_ms_v = -1.0, 0

    # -- component ------------------------------------------------------------------------

    def declare_output_fields(self, declarer: Any) -> None:
        self.bolt.declare_output_fields(declarer)

    def declare_late_stream(self, declarer: Any, input_fields: list[tuple[str, ...]]) -> None:
        """The late tuple stream carries the input's fields (all inputs must agree)."""
        stream = self.spec.late_stream
        if stream is None:
            return
        if len(set(input_fields)) != 1:
            raise InvalidTopologyException(
                f"windowed bolt {self.component!r}: a late tuple stream carries the input's fields, but its inputs "
                f"declare different fields {sorted(set(input_fields))}; subscribe to streams with the same fields")
        declarer.declare(list(input_fields[0]), stream=stream)

    def get_component_configuration(self) -> dict | None:
        """The bolt's own, plus ticks where Storm runs a timer, so windows fire on time even when no
        input arrives: at the sliding interval when processing time triggers the window, at the
        watermark interval for event time (Storm's WaterMarkEventGenerator). A tick frequency the
        user sets wins."""
        own = dict(self.bolt.get_component_configuration() or {})
        every = self.spec.watermark_interval if self.spec.event_time else self.spec.interval
        if isinstance(every, Duration) and own.get(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS) is None:
            own[Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = every.millis / 1000
        return own or None

    def check_topology(self, conf: dict, inputs: list, specs: dict) -> None:
        """At create_topology: the window must fit the (default or component) message timeout.
        Fed by spouts only, each window tuple is one pending spout tuple: remember how many
        spout tasks feed it, for the max-spout-pending check at submit."""
        sources = [specs.get(i.source) for i in inputs]
        if sources and all(s is not None and s.is_spout for s in sources):
            self.spout_tasks = sum(s.parallelism for s in {id(s): s for s in sources}.values())
        self.spec.check_conf(self.component, conf, self.spout_tasks)

    def check_engine(self, engine: str, conf: dict) -> None:
        self.spec.check_conf(self.component, conf, self.spout_tasks)
        self.bolt.check_engine(engine, conf)

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self._out = collector
        self.context = context
        self.inputs = set(context.this_sources())
        self.bolt.prepare(conf, context, WindowedOutputCollector(collector, self))

    def cleanup(self) -> None:
        self.bolt.cleanup()

    # -- input ----------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(round(self.context.wave_time * 1000))

    def _wave_ms(self) -> int:
        """`_now_ms`, computed once per wave."""
        wt = self.context.wave_time
        if wt != self._wave_secs:
            self._wave_secs, self._wave_ms_v = wt, int(round(wt * 1000))
        return self._wave_ms_v

    def execute(self, t: Tuple) -> None:  # noqa: A002
        if t.source_component == "__system":  # a tick: not held, only a chance to fire what is due
            self._out.ack(t)
            self.finish_wave()
            return
        if not self.spec.event_time:  # processing time: held as a batch of one row
            self._execute_rows(t._b.row_batch(t._i), max(self._out.input_row, 0))
            t._done = 3  # held by the store (bolt_trees.hold_pending)
            return
        ts = self._timestamp(t)
        if self._is_late(t, ts):
            return
        self.count += 1
        self.store.add(t, self.count, ts)

    def _execute_rows(self, batch: TupleBatch, first_row: int = 0) -> bool:
        """Hold a whole input batch at once, with no Tuple per row, and fire the windows its
        arrivals trigger, each over the rows that had arrived by then: the engine's path for a
        batch (BoltTask), so the windows' cost is per batch and per window, not per tuple.
        Processing time only (event time reads each tuple's timestamp); False: the engine runs
        the batch tuple by tuple. `first_row`: the batch's first row in the task's input batch
        (emits are made in the execute of the arrival that triggers them)."""
        if self.spec.event_time or batch.component == "__system" or not len(batch):
            return False
        store, out = self.store, self._out
        base, first, n = len(store), self.count, len(batch)
        now, caller_row = self._wave_ms(), out.input_row
        try:
            if not self._count_every:  # a time trigger: what is due fires before the batch arrives
                out.input_row = first_row
                self._arrival(now)
                store.add_batch(batch, first, now)
                self.count = first + n
                return True
            store.add_batch(batch, first, now)
            due = self.fired_count + self._count_every
            while due <= first + n:
                out.input_row = first_row + due - first - 1  # the arrival that triggers it
                self.count = self.fired_count = due
                self._fire(now, count_trigger=True, upto=base + due - first)
                due += self._count_every
            self.count = first + n
        except BaseException as e:  # not the bolt's own error (that fails its window): this batch fails
            self.count = first + n
            why = FailReason("error", self.component, self.context.this_task_id, f"{type(e).__name__}: {e}")
            if len(store) > base:
                self.fail_rows(np.arange(base, len(store)), why)
            else:  # not held yet: the task fails them as its inputs
                for t in tuples_of(batch):
                    out.fail_with_reason(t, why)
            raise
        finally:
            out.input_row = caller_row
        return True

    def _arrival(self, now: int) -> None:
        """Processing time, time trigger: an arrival starts the clock, or fires what is due first."""
        if self.next_ref is None:
            self.next_ref = now + self.spec.interval.millis
        else:
            self._fire_due(now)

    def finish_wave(self) -> None:
        """End of the task's wave: fire what the clock made due, ack what left every window."""
        now = self._now_ms()
        if self.spec.event_time:
            self._maybe_watermark(self.context.wave_time)
        elif not isinstance(self.spec.interval, Count) and self.next_ref is not None:
            self._fire_due(now)
        self._retire(now)

    def _timestamp(self, t: Tuple) -> int:
        name = self.spec.timestamp_field
        if not t.contains(name):
            raise ValueError(
                f"windowed bolt {self.component!r}: the tuple from {t.source_component}:{t.source_stream} has no "
                f"timestamp field {name!r} (its fields are {t.fields}); this tuple fails, the others go on")
        v = t[name]
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
            raise ValueError(
                f"windowed bolt {self.component!r}: timestamp field {name!r} is {v!r} ({type(v).__name__}), not a "
                "number of ms since the epoch; this tuple fails, the others go on")
        return int(v)

    def _is_late(self, t: Tuple, ts: int) -> bool:
        """Event time: track the stream's newest time; a tuple older than the last watermark is
        late (as Storm: `ts < watermark`): emitted on the late stream (if any), acked, and not held."""
        key = (t.source_component, t.source_stream)
        if ts > self.stream_ts.get(key, -(1 << 62)):
            self.stream_ts[key] = ts
        if self.watermark is None or ts >= self.watermark:
            return False
        if self.spec.late_stream is not None:
            self._out.emit(list(t.values), anchors=t, stream=self.spec.late_stream)
        else:
            self.late_dropped += 1
            if self.late_dropped % LATE_LOG_EVERY == 1:
                log.info("windowed bolt %r: a late tuple (ts %d, watermark %d) is in no window and acked; %d so far "
                         "(with_late_tuple_stream keeps them)", self.component, ts, self.watermark, self.late_dropped)
        self._out.ack(t)
        return True

    # -- firing ---------------------------------------------------------------------------

    def _fire_due(self, now: int) -> None:
        """Processing time: fire every time trigger due at or before `now`."""
        interval = self.spec.interval.millis
        length = None if isinstance(self.spec.length, Count) else self.spec.length.millis
        self.store.consolidate()
        while self.next_ref is not None and self.next_ref <= now:
            due = skip_empty_dues(self.store, self.next_ref, interval, length, now)
            if due > now:
                self.next_ref = due
                break
            self._fire(due, count_trigger=False)
            self.next_ref = due + interval

    def _maybe_watermark(self, wave_time: float) -> None:
        """Event time: every watermark interval, watermark = oldest newest-time over the input
        streams, minus the lag; windows whose end it reached fire, in order."""
        if self.next_watermark_at is None:
            self.next_watermark_at = wave_time + self.spec.watermark_interval.secs
            return
        if wave_time < self.next_watermark_at:
            return
        self.next_watermark_at = wave_time + self.spec.watermark_interval.secs
        if not self.stream_ts or not self.inputs <= set(self.stream_ts):
            return  # every input stream must have been heard from
        wm = min(self.stream_ts.values()) - self.spec.lag.millis
        if self.watermark is not None and wm <= self.watermark:
            return
        self.watermark = wm
        self._fire_event_windows(wm)

    def _fire_event_windows(self, wm: int) -> None:
        interval = self.spec.interval.millis
        self.store.consolidate()
        end = self.next_ref
        if end is None:
            first = earliest_after(self.store, None, wm)
            if first is None:
                return
            end = align_up(first, interval)
        while end <= wm:
            if self._fire(end, count_trigger=False):
                end += interval
                continue
            nxt = earliest_after(self.store, end, wm)
            if nxt is None:
                break
            end = align_up(nxt, interval)
        self.next_ref = end

    def _fire(self, ref: int, count_trigger: bool, upto: int | None = None) -> bool:
        """One window at `ref`: execute it if it has tuples, then ack and drop what left it.
        `upto`: the rows that had arrived by the trigger end there (a batch held at once)."""
        store = self.store
        hi = len(store) if upto is None else upto
        lo = store.floor(hi)
        rows, expired = window_and_expired(store, self.spec, ref, count_trigger, lo, hi)
        if len(rows):
            new = rows[(store.flag[rows] & IN_LAST) == 0]
            store.flag[lo:hi] &= np.uint8(~IN_LAST & 0xFF)
            store.flag[rows] |= IN_LAST
            start, end = self._bounds(ref)
            window = TupleWindow(store, rows, new, expired, start, end)
            self.current = window
            try:
                self.bolt.execute(window)
            except Exception as e:  # noqa: BLE001 - the window's tuples fail (and are replayed); the bolt goes on
                self._out.report_error(e)
                self.fail_rows(rows, FailReason("error", self.component, self.context.this_task_id,
                                                f"{type(e).__name__}: {e}"))
            finally:
                self.current = None
        if len(expired):
            store.ack(expired)
            store.gone[expired] = True
            self._out.track_held(store)
        self._retire(self._now_ms(), hi)
        return len(rows) > 0

    def _bounds(self, ref: int) -> tuple[int | None, int | None]:
        if isinstance(self.spec.length, Count):
            return None, None
        return ref - self.spec.length.millis, ref

    def _retire(self, now: int, upto: int | None = None) -> None:
        lo = self.store.floor(upto)
        rows = retired(self.store, self.spec, self.count, self.fired_count, self.next_ref, now, lo, upto)
        if len(rows) and self.store.ack(rows):
            self._out.track_held(self.store)

    def fail_rows(self, rows: np.ndarray, reason: Any) -> None:
        """Fail held rows now: their trees fail (replayed by their spouts); they leave every window."""
        reason = reason or FailReason("failed", self.component, self.context.this_task_id)
        if self.store.fail(rows, reason):
            self._out.track_held(self.store)
