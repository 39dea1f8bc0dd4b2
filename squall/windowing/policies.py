"""Which held rows are in a window, which have left it, and which no later window can contain
(Storm's eviction and trigger policies, over the store's columns at once).

A store row has an arrival number `seq` and a time `ts` (ms): its arrival time for processing
time, its timestamp field for event time. Windows, for a reference time `ref` (ms):
- count eviction (length L tuples): the last L rows that arrived before the trigger;
- processing time, time trigger: rows with ref - L <= ts < ref (a tuple arriving exactly at a
  trigger's time belongs to the next window, so each tuple is in the windows it should be);
- processing time, count trigger: rows with ts > ref - L, ref being the trigger's arrival time;
- event time (Storm's watermark policies): rows with ref - L < ts <= ref, windows ending at
  multiples of the interval, fired when the watermark reaches their end.
"""

from __future__ import annotations

import numpy as np

from squall.reliability.held import PENDING, HeldStore
from squall.windowing.config import Count, WindowSpec


def _alive(store: HeldStore) -> np.ndarray:
    return ~store.gone


def window_and_expired(store: HeldStore, spec: WindowSpec, ref: int, count_trigger: bool, lo: int = 0,
                       hi: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows in the window at `ref`, rows that have left every window by then), as positions.
    Only rows lo..hi-1 are looked at: below `lo` every row is gone, from `hi` on rows arrived
    after the trigger (a batch held at once)."""
    hi = len(store) if hi is None else hi
    alive = ~store.gone[lo:hi]
    ts = store.ts[lo:hi]
    if spec.event_time:
        length = spec.length.millis
        win, gone = alive & (ts > ref - length) & (ts <= ref), alive & (ts <= ref - length)
    elif isinstance(spec.length, Count):
        cand = alive if count_trigger else alive & (ts < ref)
        pos = np.flatnonzero(cand) + lo
        cut = max(len(pos) - spec.length.value, 0)
        return pos[cut:], pos[:cut]
    elif count_trigger:
        length = spec.length.millis
        win, gone = alive & (ts > ref - length), alive & (ts <= ref - length)
    else:
        length = spec.length.millis
        win, gone = alive & (ts >= ref - length) & (ts < ref), alive & (ts < ref - length)
    return np.flatnonzero(win) + lo, np.flatnonzero(gone) + lo


def retired(store: HeldStore, spec: WindowSpec, count: int, fired_count: int, next_ref: int | None,
            now: int, lo: int = 0, hi: int | None = None) -> np.ndarray:
    """Pending rows that no later window can contain: they can be acked now (they stay in the
    store until a window reports them expired). Rows lo..hi-1 only, as in window_and_expired."""
    hi = len(store) if hi is None else hi
    pend = ~store.gone[lo:hi] & (store.done[lo:hi] == PENDING)
    if isinstance(spec.length, Count) and not spec.event_time:
        horizon = count
        if isinstance(spec.interval, Count):  # the next window is taken at fired + interval tuples
            horizon = max(count, fired_count + spec.interval.value)
        return np.flatnonzero(pend & (store.seq[lo:hi] <= horizon - spec.length.value)) + lo
    length = spec.length.millis
    ts = store.ts[lo:hi]
    if spec.event_time:
        if next_ref is None:
            return np.zeros(0, np.int64)
        return np.flatnonzero(pend & (ts <= next_ref - length)) + lo
    if isinstance(spec.interval, Count):  # windows end at later arrival times
        return np.flatnonzero(pend & (ts <= now - length)) + lo
    if next_ref is None:
        return np.zeros(0, np.int64)
    return np.flatnonzero(pend & (ts < next_ref - length)) + lo


def align_up(ts: int, interval: int) -> int:
    """The first window end (a multiple of the interval) at or after `ts`."""
    r = ts % interval
    return ts if r == 0 else ts + interval - r


def earliest_after(store: HeldStore, after: int | None, upto: int) -> int | None:
    """The smallest timestamp of a held row in (after, upto], or None."""
    m = _alive(store) & (store.ts <= upto)
    if after is not None:
        m &= store.ts > after
    return int(store.ts[m].min()) if m.any() else None


def skip_empty_dues(store: HeldStore, due: int, interval: int, length: int | None, now: int) -> int:
    """Processing time: the next trigger time worth firing at or after `due`, skipping triggers
    whose windows would be empty (after a long idle time), so catching up costs no loop per interval."""
    alive = _alive(store)
    ts = store.ts[alive & (store.ts >= due - length)] if length is not None else store.ts[alive]
    if not len(ts):
        if due > now:
            return due
        return due + interval * ((now - due) // interval + 1)
    first = int(ts.min())  # the first window containing it ends after it
    if first < due:
        return due
    return due + interval * ((first - due) // interval + 1)
