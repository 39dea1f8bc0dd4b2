"""The rolling windows behind the UI's figures: what falls out of a window, constant memory,
and Storm's formulas for latency and capacity."""

from __future__ import annotations

import numpy as np
import pytest

from squall.observe.windows import ALL_TIME, F, WindowedStats, figures, parse_window


def test_a_figure_leaves_the_10_minute_window_but_stays_in_longer_ones():
    w = WindowedStats([7, 8], start=0.0)
    w.add(100.0, 7, acked=5)
    w.add(500.0, 8, acked=3)
    at = 100.0 + 650.0  # the first add is older than 10 minutes now, the second is not
    assert w.totals("600", at)[:, F["acked"]].tolist() == [0, 3]
    assert w.totals("10800", at)[:, F["acked"]].tolist() == [5, 3]
    assert w.totals(ALL_TIME, at)[:, F["acked"]].tolist() == [5, 3]
    assert w.totals("10800", 100.0 + 3 * 3600 + 600)[:, F["acked"]].tolist() == [0, 0]
    assert w.totals(ALL_TIME, 10**7)[:, F["acked"]].tolist() == [5, 3]


def test_memory_is_constant_whatever_the_number_of_adds():
    w = WindowedStats([1], start=0.0)
    sizes = sum(r.sums.nbytes for r in w.rings.values())
    for i in range(5000):
        w.add(float(i * 37), 1, emitted=1)
    assert sum(r.sums.nbytes for r in w.rings.values()) == sizes
    assert w.totals(ALL_TIME, 5000 * 37.0)[0, F["emitted"]] == 5000
    # a day holds 24 one-hour buckets: what is in it is what was added in the last 24 h (give or take a bucket)
    day = w.totals("86400", 4999 * 37.0)[0, F["emitted"]]
    assert 86400 / 37 - 3600 / 37 - 1 <= day <= 86400 / 37 + 1


def test_storm_formulas():
    sums = np.zeros(len(F))
    sums[F["executed"]], sums[F["exec_secs"]], sums[F["proc_secs"]] = 1000, 2.0, 3.0
    sums[F["complete_secs"]], sums[F["complete_n"]] = 5.0, 10
    f = figures(sums, span_secs=20.0)
    assert f["executeLatency"] == 2.0 and f["processLatency"] == 3.0
    assert f["capacity"] == 0.1  # 2 s executing in 20 s
    assert f["completeLatency"] == 500.0
    assert figures(np.zeros(len(F)), 10.0)["executeLatency"] is None


@pytest.mark.parametrize("bad", ["60", "all", "-1", "600s"])
def test_a_bad_window_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="600, 10800, 86400, :all-time"):
        parse_window(bad)
    assert parse_window(None) == ALL_TIME and parse_window("600") == "600"
