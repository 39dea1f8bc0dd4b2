"""Stateful bolts on both engines: acks held until the checkpoint commits, checkpoints on the
`$checkpoint` stream under simulated time, state carried across waves (pickled on Spark), the
same counts on both engines, and a topology submitted again under the same name starting from
the last committed state."""

from __future__ import annotations

from collections import Counter

from squall import Config, LocalCluster
from squall.api.checkpoint import CHECKPOINT_STREAM_ID
from tests.support.state_topology import (
    DurableSentenceSpout,
    PlainCount,
    Sink,
    build,
    committed,
    sentences,
    true_counts,
)


def _conf(path: str) -> Config:
    return Config({Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": path}, Config.SQUALL_WAVE_MAX_TUPLES: 40})


def _acked(cluster, name: str) -> int:
    return len(cluster.spout_instances(name, "sentences")[0].acked)


def test_acks_wait_for_the_checkpoint_and_restart_continues(cluster_kwargs, tmp_path):
    db = str(tmp_path / "state.sqlite")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("wc", _conf(db), build(200, counter=PlainCount, sink=Sink()).create_topology())
        cluster.wait_idle()  # many waves (40 tuples a wave): held acks and state cross them
        assert _acked(cluster, "wc") == 0, "a spout tuple was acked before its state change was committed"
        assert committed(db)[0] == Counter()
        cluster.advance_time(1.0)  # one checkpoint interval: PREPARE + COMMIT on $checkpoint
        assert _acked(cluster, "wc") == 200
        deliveries = list(cluster.coordinator("wc").checkpoints.delivered)
        assert [d.component for d in deliveries] == ["count"]
        assert cluster.get_errors("wc") == []
        cluster.kill_topology("wc")
        assert committed(db)[0] == true_counts(200)
        # the same name: the new tasks start from the committed counts and add the new sentences
        cluster.submit_topology("wc", _conf(db), build(150, counter=PlainCount, seed="more").create_topology())
        cluster.wait_idle()
        cluster.advance_time(1.0)
        assert _acked(cluster, "wc") == 150
        cluster.kill_topology("wc")
    assert committed(db)[0] == true_counts(200) + true_counts(150, "more")


def test_checkpoint_tuples_are_on_the_checkpoint_stream(tmp_path):
    with LocalCluster(engine="local", simulated_time=True, stepped=True, capture=True) as cluster:
        conf = _conf(str(tmp_path / "s.sqlite"))
        conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 500
        cluster.submit_topology("cp", conf, build(10, counter=PlainCount).create_topology())
        cluster.advance_time(2.0)  # due at 0.5, 1.0, 1.5, 2.0: four checkpoints, each in its own wave
        coord = cluster.coordinator("cp")
        assert [d.due for d in coord.checkpoints.delivered] == [0.5, 1.0, 1.5, 2.0]
        batches = coord.checkpoints._batch(coord.checkpoints.entries[0])
        assert batches.stream == CHECKPOINT_STREAM_ID == "$checkpoint"
        assert [v[1] for v in batches.values] == ["PREPARE", "COMMIT"]


def test_a_new_name_starts_empty(tmp_path):
    db = str(tmp_path / "state.sqlite")
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology("a", _conf(db), build(50, counter=PlainCount).create_topology())
        cluster.advance_time(1.0)
        cluster.kill_topology("a")
        cluster.submit_topology("b", _conf(db), build(30, counter=PlainCount).create_topology())
        cluster.advance_time(1.0)
        cluster.kill_topology("b")
    assert committed(db, "a")[0] == true_counts(50)
    assert committed(db, "b")[0] == true_counts(30)


def test_a_failure_downstream_fails_the_sentence(tmp_path):
    """The stateful bolt's emits are anchored to its held inputs: a sink that fails a word fails
    the sentence (after the commit), and the others are acked once both the commit and the sink
    have acked their trees."""
    db = str(tmp_path / "state.sqlite")
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology("f", _conf(db), build(80, counter=PlainCount, sink=Sink(("kill",))).create_topology())
        spout = cluster.spout_instances("f", "sentences")[0]
        failed: list[int] = []
        spout.fail = failed.append  # record, do not replay
        cluster.wait_idle()
        early = sorted(failed)
        cluster.advance_time(1.0)
        acked = set(spout.acked)
        cluster.kill_topology("f")
    with_kill = {i for i, s in enumerate(sentences(80)) if "kill" in s.split()}
    assert with_kill and early == sorted(with_kill)  # a fail needs no commit: at once
    assert set(failed) == with_kill and acked == set(range(80)) - with_kill


class GatedSpout(DurableSentenceSpout):
    """Emits nothing while `gate()` is false: the test sets the gate on the running instance, so it
    runs in the driver (DRIVER_BOUND) on both engines."""

    DRIVER_BOUND = True

    gate = staticmethod(lambda: True)

    def next_tuple(self):
        if self.gate():
            super().next_tuple()


def test_a_checkpoint_wave_commits_and_acks_its_own_inputs(cluster_kwargs, tmp_path):
    """PREPARE and COMMIT arrive first in their wave but run at its end: the commit includes the
    sentences that came with it (40 a wave here), and their acks leave with that wave instead of
    waiting for the next checkpoint."""
    db = str(tmp_path / "state.sqlite")
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("w", _conf(db), build(200, counter=PlainCount, spout=GatedSpout).create_topology())
        cluster.spout_instances("w", "sentences")[0].gate = lambda: cluster.clock.now() >= 1.0
        cluster.advance_time(1.0)  # the wave at 1.0: PREPARE, COMMIT and the first 40 sentences
        coord = cluster.coordinator("w")
        first = [d.wave for d in coord.checkpoints.delivered]
        assert len(first) == 1 and _acked(cluster, "w") == 40  # the other 160 wait for the next one
        assert sorted(cluster.spout_instances("w", "sentences")[0].acked) == list(range(40))
        assert committed(db)[0] == true_counts(40)
        cluster.advance_time(1.0)
        assert _acked(cluster, "w") == 200 and cluster.get_errors("w") == []
        cluster.kill_topology("w")
    assert committed(db)[0] == true_counts(200)


def test_held_trees_filling_max_pending_bring_the_checkpoint_forward(tmp_path):
    """With max spout pending 30 and a 60 s interval, waiting for the interval would stop the
    spout at 30 sentences: the coordinator checkpoints as soon as held trees fill a quarter of it."""
    db = str(tmp_path / "state.sqlite")
    conf = _conf(db)
    conf.update({Config.TOPOLOGY_MAX_SPOUT_PENDING: 30, Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 60_000,
                 Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 300, Config.SQUALL_WAVE_MAX_TUPLES: 10})
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology("mp", conf, build(200, counter=PlainCount).create_topology())
        cluster.wait_idle()  # no time passes: only early checkpoints can ack anything
        coord = cluster.coordinator("mp")
        acked = _acked(cluster, "mp")
        assert coord.checkpoints.early >= 200 // 30 and acked >= 200 - 30
        assert committed(db)[0] == true_counts(acked)  # the spout emits in order: the first ones
        cluster.advance_time(60.0)  # the interval's own checkpoint takes the rest
        assert _acked(cluster, "mp") == 200 and cluster.get_errors("mp") == []
        cluster.kill_topology("mp")
    assert committed(db)[0] == true_counts(200)
