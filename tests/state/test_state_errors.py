"""Bad settings are refused at submit with errors naming the setting; a state value that cannot
be stored fails that tuple only, with an error naming the component and the key."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from squall import Config, InvalidTopologyException, LocalCluster
from squall.state import BaseStatefulBolt
from tests.support.state_topology import PlainCount, build, committed, sentences, true_counts


class PickyCount(BaseStatefulBolt):
    """Stores a lock (which cannot be serialized) for the word "kill", counts the others."""

    def declare_output_fields(self, d):
        d.declare(["word", "count"])

    def prepare(self, conf, context, collector):
        self.collector = collector

    def init_state(self, state):
        self.state = state

    def execute(self, t):
        w = t["word"]
        if w == "kill":
            self.state.put(("count", w), threading.Lock())
        self.state.put(("count", w), self.state.get(("count", w), 0) + 1)
        self.collector.ack(t)


@pytest.mark.parametrize(("settings", "words"), [
    ({Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 30_000}, ["topology.state.checkpoint.interval.ms",
                                                           "topology.message.timeout.secs"]),
    ({Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 0}, ["topology.state.checkpoint.interval.ms", "positive"]),
    ({Config.TOPOLOGY_STATE_PROVIDER: "mongo"}, ["topology.state.provider", "'mongo'", "sqlite"]),
    ({Config.TOPOLOGY_STATE_PROVIDER: "postgres"}, ["topology.state.provider.config", "'dsn'"]),
    ({Config.TOPOLOGY_STATE_PROVIDER: "redis", Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": "x"}},
     ["topology.state.provider.config", "'url'"]),
])
def test_bad_settings_refused_at_submit(settings, words):
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        with pytest.raises(InvalidTopologyException) as e:
            cluster.submit_topology("bad", Config(settings), build(5).create_topology())
        assert "'count'" in str(e.value)
        for w in words:
            assert w in str(e.value)
        assert cluster.topology_names() == []


def test_unserializable_value_fails_that_tuple_only(tmp_path):
    db = str(tmp_path / "state.sqlite")
    n = 100
    conf = Config({Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": db}})
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        b = build(n, counter=PickyCount)
        cluster.submit_topology("picky", conf, b.create_topology())
        spout = cluster.spout_instances("picky", "sentences")[0]
        failed: list[int] = []
        spout.fail = failed.append  # record, do not replay: the sentence would fail again
        cluster.advance_time(1.0)
        errors = cluster.get_errors("picky")
        cluster.kill_topology("picky")
    with_kill = {i for i, s in enumerate(sentences(n)) if "kill" in s.split()}
    assert with_kill and set(failed) == with_kill
    assert spout.acked == set(range(n)) - with_kill
    assert errors and all("'count'" in e.error and "('count', 'kill')" in e.error for e in errors)
    # every word of every sentence counted, except the "kill"s, whose put failed (the earlier value stays)
    expected = true_counts(n)
    del expected["kill"]
    got = committed(db)[0]
    kills = got.pop("kill", 0)
    assert got == expected and kills == 0


def test_a_failed_commit_rolls_back_and_fails_the_held_inputs(tmp_path, monkeypatch):
    """The store refuses the commit (injected: a unit test of the executor's rollback): the
    state goes back to the last commit, every held input fails (its spout replays it), the error
    names the bolt and the store; the next checkpoint commits what the replays counted."""
    from squall.state.providers import SqliteProvider  # noqa: PLC0415

    db = str(tmp_path / "state.sqlite")
    real_commit = SqliteProvider.commit

    def refuse(self, namespace, txid, changes):
        raise OSError("disk full")

    monkeypatch.setattr(SqliteProvider, "commit", refuse)
    conf = Config({Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": db}})
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology("rb", conf, build(40, counter=PlainCount).create_topology())
        spout = cluster.spout_instances("rb", "sentences")[0]
        failed: list[int] = []
        replay = spout.fail
        spout.fail = lambda m: (failed.append(m), replay(m))  # record, and replay
        cluster.wait_idle()
        cluster.advance_time(1.0)
        errors = [e.error for e in cluster.get_errors("rb")]
        assert sorted(failed) == list(range(40)) and spout.acked == set()
        assert committed(db)[0] == Counter()
        monkeypatch.setattr(SqliteProvider, "commit", real_commit)
        cluster.advance_time(1.0)  # the replays are executed, then committed at the next checkpoint
        cluster.advance_time(1.0)
        assert spout.acked == set(range(40))
        cluster.kill_topology("rb")
    assert errors and all("'count'" in e and "sqlite" in e and "disk full" in e for e in errors)
    assert committed(db)[0] == true_counts(40)  # the rolled-back counts were not kept: counted once
