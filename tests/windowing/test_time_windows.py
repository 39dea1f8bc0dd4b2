"""Time windows on the topology clock (simulated: advance_time), processing time and event
time (timestamp field, lag, watermarks, late tuple stream); both engines."""

from __future__ import annotations

from squall.windowing import Count, Duration
from tests.windowing.helpers import Recorder, Sink, windowed_cluster, windows


def feed_at(cluster, spout, rows):
    for values in rows:
        spout.feed(list(values), values[0])
    cluster.wait_idle()


def test_sliding_processing_time_window(cluster_kwargs):
    bolt = Recorder().with_window(Duration(10), Duration(5))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, sink=Sink())
    with cluster:
        feed_at(cluster, spout, [["a"], ["b"]])  # t=0: the first trigger is due at 5 s
        cluster.advance_time(3)
        feed_at(cluster, spout, [["c"]])
        assert windows(cluster) == []
        cluster.advance_time(3)  # t=6: the next arrival fires the window due at 5 s
        feed_at(cluster, spout, [["d"]])
        assert windows(cluster) == [[["a", "b", "c"], ["a", "b", "c"], [], -5000, 5000]]
        cluster.advance_time(5)  # t=11
        feed_at(cluster, spout, [["e"]])
        assert windows(cluster)[-1] == [["a", "b", "c", "d"], ["d"], [], 0, 10000]
        # the window due at 15 s starts at 5 s: a, b and c (arrived before 5 s) are in no later window
        assert sorted(tracker.acked) == ["a", "b", "c"]
        cluster.advance_time(5)  # t=16
        feed_at(cluster, spout, [["f"]])
        assert windows(cluster)[-1] == [["d", "e"], ["e"], ["a", "b", "c"], 5000, 15000]
        assert sorted(tracker.acked) == ["a", "b", "c", "d"]
        assert not tracker.failed


def test_tumbling_processing_time_window(cluster_kwargs):
    bolt = Recorder().with_tumbling_window(Duration(5))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, sink=Sink())
    with cluster:
        feed_at(cluster, spout, [["a"]])
        cluster.advance_time(2)
        feed_at(cluster, spout, [["b"]])
        cluster.advance_time(3)  # t=5: "c" arrives as the first window closes, so it is in the second
        feed_at(cluster, spout, [["c"]])
        assert windows(cluster) == [[["a", "b"], ["a", "b"], [], 0, 5000]]
        assert sorted(tracker.acked) == ["a", "b"]
        cluster.advance_time(5)
        feed_at(cluster, spout, [["d"]])
        assert windows(cluster)[-1] == [["c"], ["c"], ["a", "b"], 5000, 10000]
        assert sorted(tracker.acked) == ["a", "b", "c"]


def test_time_window_with_count_interval(cluster_kwargs):
    bolt = Recorder().with_window(Duration(10), Count(2))  # the last 10 s, every 2 tuples
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, sink=Sink())
    with cluster:
        feed_at(cluster, spout, [["a"], ["b"]])
        cluster.advance_time(8)
        feed_at(cluster, spout, [["c"], ["d"]])
        cluster.advance_time(8)  # t=16: a and b (t=0) are out of every window from now on
        feed_at(cluster, spout, [["e"], ["f"]])
        got = windows(cluster)
        assert [w[0] for w in got] == [["a", "b"], ["a", "b", "c", "d"], ["c", "d", "e", "f"]]
        assert got[2][2] == ["a", "b"]
        assert sorted(tracker.acked) == ["a", "b"]


def test_count_window_with_time_interval(cluster_kwargs):
    bolt = Recorder().with_window(Count(3), Duration(5))  # the last 3 tuples, every 5 s
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, sink=Sink())
    with cluster:
        feed_at(cluster, spout, [["a"], ["b"], ["c"], ["d"]])  # "a" is in no window: acked at once
        assert sorted(tracker.acked) == ["a"]
        cluster.advance_time(5)
        feed_at(cluster, spout, [["e"]])
        assert [w[0] for w in windows(cluster)] == [["b", "c", "d"]]


def test_event_time_window_with_lag_watermark_and_late_stream(cluster_kwargs):
    bolt = (Recorder().with_timestamp_field("ts").with_window(Duration(10), Duration(5))
            .with_lag(Duration(2)).with_watermark_interval(Duration(1)).with_late_tuple_stream("late"))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, fields=("id", "ts"), sink=Sink(),
                                               late_sink=True)
    with cluster:
        feed_at(cluster, spout, [["a", 1000], ["c", 7000], ["b", 4000]])  # out of order: fine within the lag
        cluster.advance_time(1)  # the watermark timer: 7 s - 2 s lag = 5 s, the window ending at 5 s fires
        assert windows(cluster) == [[["a", "b"], ["a", "b"], [], -5000, 5000]]
        feed_at(cluster, spout, [["d", 12000]])
        cluster.advance_time(1)  # watermark 10 s: the window ending at 10 s fires
        assert windows(cluster)[-1] == [["a", "c", "b"], ["c"], [], 0, 10000]
        assert sorted(tracker.acked) == ["a", "b"]  # the window ending at 15 s starts after them
        feed_at(cluster, spout, [["e", 9000], ["f", 14000], ["at", 10000]])  # e: older than the watermark, late
        assert windows(cluster, "late") == [["e", 9000]]  # "at" (= the watermark) is not late, as in Storm
        assert "e" in tracker.acked  # acked once the late stream's child is
        feed_at(cluster, spout, [["g", 20000]])
        cluster.advance_time(1)  # watermark 18 s: the window ending at 15 s fires
        assert windows(cluster)[-1] == [["c", "d", "f", "at"], ["d", "f", "at"], ["a", "b"], 5000, 15000]
        assert sorted(tracker.acked) == ["a", "at", "b", "c", "e"]  # "at": the window ending at 20 s starts at it
        assert not tracker.failed


def test_late_tuple_without_late_stream_is_acked_and_dropped(cluster_kwargs):
    bolt = Recorder().with_timestamp_field("ts").with_tumbling_window(Duration(5))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, fields=("id", "ts"), sink=Sink())
    with cluster:
        feed_at(cluster, spout, [["a", 1000]])
        cluster.advance_time(1)
        feed_at(cluster, spout, [["b", 6000]])
        cluster.advance_time(1)  # watermark 6 s: the window ending at 5 s fires
        assert [w[0] for w in windows(cluster)] == [["a"]]
        feed_at(cluster, spout, [["old", 2000]])
        assert "old" in tracker.acked
        feed_at(cluster, spout, [["c", 12000]])
        cluster.advance_time(1)
        assert [w[0] for w in windows(cluster)] == [["a"], ["b"]]  # "old" is in no window


def test_storm_late_tuple_scenario(cluster_kwargs):
    """Storm's documented behaviour: the watermark timer fires the windows up to it without any
    new arrival; a tuple older than the watermark is late (on the late stream, acked, in no
    window); a window's tuples are acked once it has fired and they have left it."""
    bolt = (Recorder().with_timestamp_field("ts").with_tumbling_window(Duration(10)).with_lag(Duration(1))
            .with_watermark_interval(Duration(1)).with_late_tuple_stream("late"))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, fields=("id", "ts"), sink=Sink(),
                                               late_sink=True)
    with cluster:
        feed_at(cluster, spout, [["a", 1000], ["b", 2000], ["c", 35000]])
        cluster.advance_time(2)  # watermark 34 s: the window ending at 10 s fires, nothing else arrived
        assert windows(cluster) == [[["a", "b"], ["a", "b"], [], 0, 10000]]
        assert sorted(tracker.acked) == ["a", "b"]
        feed_at(cluster, spout, [["old", 5000]])
        assert windows(cluster, "late") == [["old", 5000]]
        assert sorted(tracker.acked) == ["a", "b", "old"]
        feed_at(cluster, spout, [["d", 45000], ["e", 52000]])
        cluster.advance_time(2)  # watermark 51 s: the windows ending at 40 s and 50 s fire
        assert [w[0] for w in windows(cluster)] == [["a", "b"], ["c"], ["d"]]
        assert sorted(tracker.acked) == ["a", "b", "c", "d", "old"]  # e waits for its window
        assert not tracker.failed


def test_time_window_without_interval_slides_with_every_tuple(cluster_kwargs):
    bolt = Recorder().with_window(Duration(10))  # as Storm: a window at every tuple
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, sink=Sink())
    with cluster:
        feed_at(cluster, spout, [["a"]])
        cluster.advance_time(4)
        feed_at(cluster, spout, [["b"]])
        cluster.advance_time(7)
        feed_at(cluster, spout, [["c"]])
        assert [w[:3] for w in windows(cluster)] == [
            [["a"], ["a"], []], [["a", "b"], ["b"], []], [["b", "c"], ["c"], ["a"]]]
        assert sorted(tracker.acked) == ["a"]


def test_time_window_fires_on_ticks_with_no_new_input(cluster_kwargs):
    # A time-triggered window asks for ticks at its sliding interval (as Storm's timer does), so it
    # fires, and its tuples are acked once no later window holds them, though nothing else arrives.
    bolt = Recorder().with_window(Duration(10), Duration(5))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, sink=Sink())
    with cluster:
        feed_at(cluster, spout, [["a"], ["b"]])
        cluster.advance_time(6)
        cluster.wait_idle()
        assert windows(cluster) == [[["a", "b"], ["a", "b"], [], -5000, 5000]]
        assert not tracker.acked
        cluster.advance_time(10)  # the windows due at 10 s and 15 s: a and b are in none after 15 s
        cluster.wait_idle()
        # the window ending at 15 s is empty and, as in Storm, not handed to execute
        assert windows(cluster) == [[["a", "b"], ["a", "b"], [], -5000, 5000], [["a", "b"], [], [], 0, 10000]]
        assert sorted(tracker.acked) == ["a", "b"]
        assert not tracker.failed


def test_storm_late_tuple_scenario_in_real_time(cluster_kwargs):
    """The same in real time: the watermark timer runs on the wall clock, with no arrival to move it."""
    import time  # noqa: PLC0415

    from squall import Config, LocalCluster, TopologyBuilder  # noqa: PLC0415
    from squall.testing import AckFailMapTracker, FeederSpout  # noqa: PLC0415

    def until(what, check, secs=60.0):
        deadline = time.monotonic() + secs  # a guard against a hang; the test waits for work done
        while not check():
            assert time.monotonic() < deadline, f"not within {secs} s: {what}"
            time.sleep(0.02)

    spout, tracker = FeederSpout(["id", "ts"]), AckFailMapTracker()
    spout.set_ack_fail_delegate(tracker)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("win", Recorder().with_timestamp_field("ts").with_tumbling_window(Duration(10)).with_lag(Duration(1))
               .with_watermark_interval(Duration(0.2)).with_late_tuple_stream("late")).global_grouping("src")
    b.set_bolt("sink", Sink()).shuffle_grouping("win")
    b.set_bolt("late", Sink()).shuffle_grouping("win", "late")
    with LocalCluster(capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("w", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30}, b.create_topology())
        for values in (["a", 1000], ["b", 2000], ["c", 35000]):
            spout.feed(values, values[0])
        first = [[["a", "b"], ["a", "b"], [], 0, 10000]]
        until("the window ending at 10 s fired and its tuples were acked",
              lambda: sorted(tracker.acked) == ["a", "b"] and windows(cluster) == first)
        spout.feed(["old", 5000], "old")
        until("the late tuple was acked", lambda: "old" in tracker.acked)
        assert windows(cluster, "late") == [["old", 5000]]
        assert [w[0] for w in windows(cluster)] == [["a", "b"]]
        assert "c" not in tracker.acked and not tracker.failed
