"""What only the Redis Streams spout does: claiming the entries of a dead consumer, keeping its
own entries from being claimed, its settings and password handling, its module name. The broker
contract (acks, retries, dead letters, drops, kills) is in test_broker_contract.py.

Skipped when Redis is unreachable, failed instead when CI=true (tests/support/broker_services.py).
"""

from __future__ import annotations

import pytest

from squall import Bolt, Config, LocalCluster
from squall.connectors.dead_letters import DL_REASON
from squall.connectors.redis import RedisStreamSpout, redis_url
from tests.support.broker_admins import GROUP
from tests.support.broker_services import check_module_does_not_shadow, wait_until
from tests.support.broker_topology import Hold, Recorder, open_fails_without_showing, spout_into
from tests.support.components import FailBolt

redis = pytest.importorskip("redis")


class Record(Bolt):
    """[message, meta] -> [id, attempts]."""

    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        d.declare(["id", "attempts"])

    def execute(self, t):
        self.c.emit([t[0]["id"], t[1]["attempts"]], anchors=t)
        self.c.ack(t)


def test_entries_of_a_dead_consumer_are_claimed_after_the_idle_time(redis_admin):
    """A consumer read entries and died. The spout claims them once idle past claim_idle_secs;
    their attempt is Redis's delivery count. One that already used its deliveries goes to the
    dead letters with reason "lost"."""
    r = redis_admin.r
    stream = redis_admin.source("claim")
    redis_admin.publish(stream, [b'{"id": 0}', b'{"id": 1}', b'{"id": 2}'])
    ids = [eid.decode() for eid, _ in r.xrange(stream)]
    r.xgroup_create(stream, GROUP, id="0")
    r.xreadgroup(GROUP, "dead-consumer", {stream: ">"}, count=10)
    for _ in range(2):  # entry 2 was delivered 3 times already (and never acked)
        r.xclaim(stream, GROUP, "dead-consumer", 0, [ids[2]])
    rec = Recorder()
    spout = redis_admin.spout(stream, rec, scheme="json", meta_field="meta", max_retries=2, max_deliveries=3,
                              claim_idle_secs=0.5)
    with LocalCluster(engine="local", capture=True) as cluster:
        cluster.submit_topology("claim", Config(), spout_into(spout, Record(), "rec"))
        wait_until(lambda: rec.n_acked() >= 2 and rec.dead, 20, lambda: f"{rec.counters()}")
        out = [v for vals in cluster.coordinator("claim").captured["rec"]["default"].values() for v in vals]
        cluster.kill_topology("claim")
    assert sorted(out) == [[0, 2], [1, 2]]  # first delivery lost with the dead consumer: attempt 2
    [(key, _m, failure)] = rec.dead
    assert key == 2 and failure.kind == "lost" and failure.attempts == 4
    assert redis_admin.settled(stream)
    [(_body, info)] = redis_admin.dead_letters(stream)
    assert info[DL_REASON] == "lost"


def test_a_spout_that_takes_an_entry_over_knows_its_failures(redis_admin):
    """The topology's failures of an entry outlive the spout that saw them (the group's failures
    hash): with max_retries=1, an entry failed once by a spout that then went away is
    dead-lettered at its next failure, in the spout that claims it; the hash is emptied."""
    r = redis_admin.r
    stream = redis_admin.source("failures")
    redis_admin.publish(stream, [b'{"id": 0}'])
    failures_key = f"{stream}:{GROUP}:failures"
    first = Recorder()
    spout = redis_admin.spout(stream, first, scheme="json", max_retries=1, retry_delay_secs=60)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("first", Config(), spout_into(spout, FailBolt()))
        wait_until(lambda: r.hget(failures_key, r.xrange(stream)[0][0]) == b"1", 20, lambda: f"{first.counters()}")
        cluster.kill_topology("first")  # the entry stays pending for the first spout's consumer
    second = Recorder()
    spout = redis_admin.spout(stream, second, scheme="json", max_retries=1, retry_delay_secs=0.05,
                              claim_idle_secs=0.5)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("second", Config(), spout_into(spout, FailBolt()))
        wait_until(lambda: second.dead, 20, lambda: f"{second.counters()}")
        cluster.kill_topology("second")
    [(key, _m, failure)] = second.dead
    assert key == 0 and failure.kind == "failed" and failure.attempts == 2
    assert second.total("failed") == 1 and second.total("retried") == 0
    assert redis_admin.settled(stream) and not r.exists(failures_key)


def test_entries_in_flight_for_long_are_not_claimed_by_others(redis_admin):
    """A tree that takes longer than claim_idle_secs: the spout keeps its entry's idle time
    low, so another consumer's XAUTOCLAIM does not take it."""
    stream = redis_admin.source("hold")
    redis_admin.publish(stream, [b"x"])
    rec = Recorder()
    spout = redis_admin.spout(stream, rec, claim_idle_secs=1.0)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("hold", Config(), spout_into(spout, Hold()))
        wait_until(lambda: rec.spouts and rec.spouts[0].counters.emitted == 1, 10, "emitted")
        wait_until(lambda: rec.spouts[0].counters.extra.get("touched", 0) >= 3, 10, "3 touches")
        _cursor, stolen, _deleted = redis_admin.r.xautoclaim(stream, GROUP, "thief", 1000, "0-0")
        cluster.kill_topology("hold")
    assert stolen == []
    assert redis_admin.unacked(stream) == 1  # still pending: held by the spout, not acked, not stolen


def test_settings_from_the_environment_and_passwords_never_shown(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("REDIS_HOST", "10.0.0.9")
    monkeypatch.setenv("REDIS_PORT", "6380")
    monkeypatch.setenv("REDIS_PASSWORD", "pa/ss:word")
    monkeypatch.setenv("REDIS_DB", "3")
    kw = redis.connection.parse_url(redis_url().reveal())
    assert (kw["host"], kw["port"], kw["password"], kw["db"]) == ("10.0.0.9", 6380, "pa/ss:word", 3)
    spout = RedisStreamSpout("s")
    assert spout.url == "redis://:***@10.0.0.9:6380/3"
    assert "pa/ss" not in repr(spout) and "pa/ss" not in repr(spout._url)
    monkeypatch.setenv("REDIS_URL", "redis://u:hunter2@h:1/0")
    assert RedisStreamSpout("s").url == "redis://u:***@h:1/0"


def test_a_wrong_password_fails_at_open_without_showing_it(redis_admin, caplog):
    """The local Redis has no user "nobody": Redis itself refuses the credentials."""
    spout = RedisStreamSpout(redis_admin.source("pw"), url="redis://nobody:Sup3r-S3cret-pw@127.0.0.1:6379/0")
    text = open_fails_without_showing(spout, "Sup3r-S3cret-pw", caplog)
    assert "redis://nobody:***@127.0.0.1:6379/0" in text
    assert "AuthenticationError" in text, text


def test_the_module_name_does_not_shadow_redis_py():
    """squall/connectors/redis/ must not hide the redis package, in any import order."""
    check_module_does_not_shadow("redis", "redis.streams", "Redis", "RedisStreamSpout")
