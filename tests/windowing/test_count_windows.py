"""Count windows, sliding and tumbling: contents, new and expired tuples, and when each tuple
is acked (as soon as no later window can contain it); both engines, any wave size."""

from __future__ import annotations

import pytest

from squall import Config
from squall.windowing import Count
from tests.windowing.helpers import Recorder, Sink, feed, windowed_cluster, windows


@pytest.mark.parametrize("wave_tuples", [None, 2])
def test_sliding_count_window(cluster_kwargs, wave_tuples):
    conf = {Config.SQUALL_WAVE_MAX_TUPLES: wave_tuples} if wave_tuples else None
    bolt = Recorder().with_window(Count(3), Count(2))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, conf=conf, sink=Sink())
    with cluster:
        feed(cluster, spout, range(1, 8))
        assert windows(cluster) == [
            [[1, 2], [1, 2], [], None, None],
            [[2, 3, 4], [3, 4], [1], None, None],
            [[4, 5, 6], [5, 6], [2, 3], None, None],
        ]
        # the next window (at 8 tuples) holds 6, 7, 8: 1..5 are acked already, 6 and 7 are held
        assert sorted(tracker.acked) == [1, 2, 3, 4, 5]
        assert not tracker.failed
        feed(cluster, spout, [8])
        assert windows(cluster)[-1] == [[6, 7, 8], [7, 8], [4, 5], None, None]
        assert sorted(tracker.acked) == [1, 2, 3, 4, 5, 6, 7]  # the window at 10 holds 8, 9, 10


def test_tumbling_count_window_acks_each_window_after_it_fires(cluster_kwargs):
    bolt = Recorder().with_tumbling_window(Count(3))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, sink=Sink())
    with cluster:
        feed(cluster, spout, range(1, 8))
        assert windows(cluster) == [
            [[1, 2, 3], [1, 2, 3], [], None, None],
            [[4, 5, 6], [4, 5, 6], [1, 2, 3], None, None],
        ]
        assert sorted(tracker.acked) == [1, 2, 3, 4, 5, 6]  # 7 waits for its window


def test_a_failed_emit_replays_the_windows_spout_tuples(cluster_kwargs):
    bolt = Recorder().with_tumbling_window(Count(3))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, sink=Sink(fail_ids={5}))
    with cluster:
        feed(cluster, spout, range(1, 7))
        assert sorted(tracker.acked) == [1, 2, 3]
        assert sorted(tracker.failed) == [4, 5, 6]  # the whole window [4, 5, 6], through its emit


def test_a_window_emit_keeps_its_tuples_pending_until_the_child_is_acked(cluster_kwargs):
    class Hold(Sink):
        """Holds every tuple: the window's trees stay open."""

        def execute(self, t):
            pass

    bolt = Recorder().with_tumbling_window(Count(2))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, sink=Hold())
    with cluster:
        feed(cluster, spout, range(1, 5))
        assert len(windows(cluster)) == 2
        assert not tracker.acked and not tracker.failed


class FailOdd(Recorder):
    """Fails the odd ids of each window itself, and emits one tuple anchored to the last tuple only."""

    def execute(self, window):
        tuples = window.get()
        for t in tuples:
            if t["id"] % 2:
                self.collector.fail(t)
        self.collector.emit([[t["id"] for t in tuples], [], [], None, None], anchors=tuples[-1])


def test_window_tuples_failed_by_the_bolt_and_explicit_anchors(cluster_kwargs):
    bolt = FailOdd().with_tumbling_window(Count(2))
    cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, sink=Sink(fail_ids={4}))
    with cluster:
        feed(cluster, spout, range(1, 7))
        # windows [1, 2], [3, 4], [5, 6]: odd ids failed by the bolt; each emit is anchored to the even id
        # alone, so the sink failing the emit of [3, 4] fails 4 and nothing more; 2 and 6 are acked
        assert sorted(tracker.failed) == [1, 3, 4, 5]
        assert sorted(tracker.acked) == [2, 6]


@pytest.mark.parametrize("length,interval", [(7, 3), (5, 5), (4, 1)])
def test_a_wave_of_many_tuples_gives_the_windows_of_one_tuple_per_wave(cluster_kwargs, length, interval):
    """The engine hands the windowed bolt whole batches: the windows fired inside one batch, and
    what each acks, are those of the same tuples arriving one wave each."""
    runs = []
    for wave_tuples in (None, 1):
        conf = {Config.SQUALL_WAVE_MAX_TUPLES: wave_tuples} if wave_tuples else None
        bolt = Recorder().with_window(Count(length), Count(interval))
        cluster, spout, tracker = windowed_cluster(cluster_kwargs, bolt, conf=conf, sink=Sink())
        with cluster:
            feed(cluster, spout, range(1, 41))
            runs.append((windows(cluster), sorted(tracker.acked), tracker.failed))
    (many, acked_many, failed_many), (one, acked_one, failed_one) = runs
    assert len(many) == 40 // interval
    assert many == one and acked_many == acked_one
    assert not failed_many and not failed_one
    horizon = max(40, 40 // interval * interval + interval)  # the next window's last tuple
    assert acked_many == list(range(1, horizon - length + 1))  # acked: what no later window can hold
