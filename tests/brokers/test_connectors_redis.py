"""RedisStreamSpout against the real Redis on 127.0.0.1:6379; both engines.

Skipped when Redis is unreachable, failed instead when CI=true (tests/support/connector_helpers.py).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys

import pytest

from squall import Bolt, Config, LocalCluster, TopologyBuilder
from squall.connectors.base import DL_ATTEMPTS, DL_ERROR, DL_REASON, DL_SOURCE, DL_SOURCE_ID, dead_letter_info
from squall.connectors.redis import RedisStreamSpout, redis_url
from tests.support.connector_helpers import (
    ROOT,
    FileSink,
    Recorder,
    Recording,
    TcpProxy,
    captured_ids,
    check_scenario,
    need_redis,
    read_ids,
    scenario_conf,
    start_worker,
    two_bolt_topology,
    unique,
    wait_until,
)

redis = pytest.importorskip("redis")

N = 10_000
MAX_RETRIES = 3
GROUP = "squall-test"


class RecRedis(Recording, RedisStreamSpout):
    pass


@pytest.fixture
def r():
    client = redis.Redis.from_url(need_redis())
    made: list[str] = []
    client.made = made
    yield client
    for key in made:
        client.delete(key, f"{key}:dlq")
    client.close()


def new_stream(r, prefix: str) -> str:
    name = unique(prefix)
    r.made.append(name)
    return name


def add(r, stream: str, payloads: list, field: str = "payload") -> list[str]:
    pipe = r.pipeline(transaction=False)
    for p in payloads:
        pipe.xadd(stream, p if isinstance(p, dict) else {field: p})
    return [i.decode() for i in pipe.execute()]


def pending(r, stream: str, group: str = GROUP) -> int:
    return r.xpending(stream, group)["pending"]


def test_10k_messages_random_failures_and_a_poison_message(r, cluster_kwargs):
    stream = new_stream(r, "redis10k")
    add(r, stream, [b'{"id": %d}' % i for i in range(N)] + [b'{"id": "poison", "poison": true}'])
    rec = Recorder()
    spout = RecRedis(stream, GROUP, need_redis(), scheme="json", max_retries=MAX_RETRIES, retry_delay_secs=0.2)
    spout.recorder = rec
    with LocalCluster(capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("redis", scenario_conf(cluster_kwargs["engine"]), two_bolt_topology(spout, 0.01))
        wait_until(lambda: rec.n_acked() >= N and rec.dead, 60,
                   lambda: f"acked {rec.n_acked()}/{N}, dead {len(rec.dead)}, spouts {rec.counters()}")
        seen = captured_ids(cluster, "redis")
        cluster.kill_topology("redis")  # flushes the last acks
    check_scenario(rec, seen, N, "poison", MAX_RETRIES)
    assert pending(r, stream) == 0
    assert r.xlen(f"{stream}:dlq") == 1
    [(dl_id, fields)] = r.xrange(f"{stream}:dlq")
    info = dead_letter_info(fields)
    assert fields[b"payload"] == b'{"id": "poison", "poison": true}'
    assert info[DL_REASON] == "error" and info[DL_ATTEMPTS] == str(MAX_RETRIES + 1)
    assert "ValueError: poison message 'poison' cannot be parsed" in info[DL_ERROR]
    assert info[DL_SOURCE] == stream
    # the attempts are Redis's own delivery count; the entry is acked at the source
    assert not r.xpending_range(stream, GROUP, min=info[DL_SOURCE_ID], max=info[DL_SOURCE_ID], count=1)


def test_bad_payloads_are_dead_lettered_with_a_decode_reason(r, cluster_kwargs):
    stream = new_stream(r, "redisbad")
    add(r, stream, [b'{"id": 0}', b"\xff\xfe not utf-8", b'{"id": 1', {"other": b"x"}, b'{"id": 2}'])
    rec = Recorder()
    spout = RecRedis(stream, GROUP, need_redis(), scheme="json", max_retries=1, retry_delay_secs=0.1)
    spout.recorder = rec
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("bad", scenario_conf(cluster_kwargs["engine"], 100), two_bolt_topology(spout, 0))
        wait_until(lambda: rec.n_acked() >= 2 and len(rec.dead) >= 3, 30,
                   lambda: f"acked {dict(rec.acked)}, dead {[str(d[2]) for d in rec.dead]}")
        cluster.kill_topology("bad")
    assert sorted(rec.acked) == [0, 2]
    dead = [(f, dead_letter_info(f)) for _, f in r.xrange(f"{stream}:dlq")]
    assert [i[DL_REASON] for _, i in dead] == ["decode"] * 3
    by_body = {f.get(b"payload"): i for f, i in dead}
    assert "not valid UTF-8" in by_body[b"\xff\xfe not utf-8"][DL_ERROR]
    assert "not valid JSON" in by_body[b'{"id": 1'][DL_ERROR]
    assert "entry has no field 'payload'" in by_body[None][DL_ERROR]
    assert by_body[None][DL_ATTEMPTS] == "1"
    assert pending(r, stream) == 0


def test_entries_of_a_dead_consumer_are_claimed_after_the_idle_time(r):
    """A consumer read entries and died. The spout claims them once idle past claim_idle_secs;
    their attempt is Redis's delivery count. One that already used its deliveries goes to the
    dead letters with reason "lost"."""
    stream = new_stream(r, "redisclaim")
    ids = add(r, stream, [b'{"id": 0}', b'{"id": 1}', b'{"id": 2}'])
    r.xgroup_create(stream, GROUP, id="0")
    r.xreadgroup(GROUP, "dead-consumer", {stream: ">"}, count=10)
    for _ in range(2):  # entry 2 was delivered 3 times already (and never acked)
        r.xclaim(stream, GROUP, "dead-consumer", 0, [ids[2]])

    class Record(Bolt):
        def prepare(self, conf, context, collector):
            self.c = collector

        def declare_output_fields(self, d):
            d.declare(["id", "attempts"])

        def execute(self, t):
            self.c.emit([t[0]["id"], t[1]["attempts"]], anchors=t)
            self.c.ack(t)

    rec = Recorder()
    spout = RecRedis(stream, GROUP, need_redis(), scheme="json", meta_field="meta", max_retries=2,
                     claim_idle_secs=0.5)
    spout.recorder = rec
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("rec", Record()).shuffle_grouping("src")
    with LocalCluster(engine="local", capture=True) as cluster:
        cluster.submit_topology("claim", Config(), b.create_topology())
        wait_until(lambda: rec.n_acked() >= 2 and rec.dead, 20, lambda: f"{rec.counters()}")
        out = [v for vals in cluster.coordinator("claim").captured["rec"]["default"].values() for v in vals]
        cluster.kill_topology("claim")
    assert sorted(out) == [[0, 2], [1, 2]]  # first delivery lost with the dead consumer: attempt 2
    [(key, _m, failure)] = rec.dead
    assert key == 2 and failure.kind == "lost" and failure.attempts == 4
    assert pending(r, stream) == 0
    [(_, fields)] = r.xrange(f"{stream}:dlq")
    assert dead_letter_info(fields)[DL_REASON] == "lost"


def test_entries_in_flight_for_long_are_not_claimed_by_others(r):
    """A tree that takes longer than claim_idle_secs: the spout keeps its entry's idle time
    low, so another consumer's XAUTOCLAIM does not take it."""

    class Hold(Bolt):
        def prepare(self, conf, context, collector):
            self.held = []

        def declare_output_fields(self, d):
            pass

        def execute(self, t):
            self.held.append(t)

    stream = new_stream(r, "redishold")
    add(r, stream, [b"x"])
    rec = Recorder()
    spout = RecRedis(stream, GROUP, need_redis(), claim_idle_secs=1.0)
    spout.recorder = rec
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("hold", Hold()).shuffle_grouping("src")
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("hold", Config(), b.create_topology())
        wait_until(lambda: rec.spouts and rec.spouts[0].counters.emitted == 1, 10, "emitted")
        wait_until(lambda: rec.spouts[0].counters.extra.get("touched", 0) >= 3, 10, "3 touches")
        _cursor, stolen, _deleted = r.xautoclaim(stream, GROUP, "thief", 1000, "0-0")
        cluster.kill_topology("hold")
    assert stolen == []


def test_connection_drop_loses_nothing(r):
    n = 3000
    stream = new_stream(r, "redisdrop")
    add(r, stream, [b'{"id": %d}' % i for i in range(n)])
    proxy = TcpProxy("127.0.0.1", 6379)
    rec = Recorder()
    spout = RecRedis(stream, GROUP, f"redis://127.0.0.1:{proxy.port}/0", scheme="json", batch_size=100)
    spout.recorder = rec
    try:
        with LocalCluster(engine="local") as cluster:
            conf = Config()
            conf.set_max_spout_pending(200)
            sink = FileSink(os.devnull, delay_ms=0.5)
            cluster.submit_topology("drop", conf, two_bolt_topology(spout, 0.0, sink=sink, parallelism=1))
            wait_until(lambda: rec.n_acked() >= 500, 30, lambda: f"acked {rec.n_acked()}")
            assert rec.n_acked() < n, "finished before the drop: the test proves nothing"
            assert proxy.drop() >= 1
            wait_until(lambda: rec.n_acked() >= n, 60, lambda: f"acked {rec.n_acked()}/{n}, {rec.counters()}")
            cluster.kill_topology("drop")
    finally:
        proxy.close()
    assert set(rec.acked) == set(range(n))
    assert pending(r, stream) == 0


def test_kill_and_restart_loses_nothing(r, tmp_path):
    """SIGKILL the topology process mid-stream; a new process (a new consumer in the same
    group) claims what the dead one held once it is idle past the message timeout (3 s)."""
    n = 2000
    stream = new_stream(r, "rediskill")
    add(r, stream, [b'{"id": %d}' % i for i in range(n)])
    out = tmp_path / "out.txt"
    worker = start_worker("redis", stream, out, delay_ms=1)
    try:
        # Kill it while it holds entries (between two batches it may briefly hold none).
        wait_until(lambda: sum(read_ids(out).values()) >= n // 4 and r.xpending(stream, "squall-kill")["pending"] > 0,
                   60, lambda: f"{sum(read_ids(out).values())} lines")
        assert worker.poll() is None
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
        assert len(set(read_ids(out))) < n, "finished before the kill: the test proves nothing"
        held = r.xpending(stream, "squall-kill")["pending"]
        assert held > 0, "the killed consumer held nothing: the test proves nothing"
        worker = start_worker("redis", stream, out, delay_ms=1)
        wait_until(lambda: set(read_ids(out)) >= set(range(n)) and pending(r, stream, "squall-kill") == 0, 90,
                   lambda: f"{len(set(range(n)) - set(read_ids(out)))} ids missing, "
                           f"{pending(r, stream, 'squall-kill')} pending; stderr: "
                           f"{(tmp_path / 'out.txt.stderr').read_text()[-2000:]}")
    finally:
        if worker.poll() is None:
            worker.terminate()
            worker.wait(30)
    assert set(read_ids(out)) == set(range(n))
    assert pending(r, stream, "squall-kill") == 0


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


def test_a_wrong_password_fails_at_open_without_showing_it(r, caplog):
    caplog.set_level(logging.DEBUG)
    spout = RedisStreamSpout(new_stream(r, "redispw"), url="redis://nobody:Sup3r-S3cret-pw@127.0.0.1:6379/0")
    b = TopologyBuilder()
    b.set_spout("src", spout)
    with LocalCluster(engine="local") as cluster, pytest.raises(ConnectionError) as ei:
        cluster.submit_topology("pw", Config(), b.create_topology())
    assert "redis://nobody:***@127.0.0.1:6379/0" in str(ei.value)
    assert "Sup3r-S3cret-pw" not in str(ei.value) and "Sup3r-S3cret-pw" not in caplog.text


def test_the_module_name_does_not_shadow_redis_py():
    """squall/connectors/redis.py must not hide the redis package, in any import order."""
    code = ("import squall.connectors.redis as c, squall.connectors.redis_streams as s, redis;"
            "assert hasattr(redis, 'Redis') and s.redis is redis and c.RedisStreamSpout is s.RedisStreamSpout;"
            "print(redis.__file__)")
    for order in (code, "import redis; " + code):
        res = subprocess.run([sys.executable, "-c", order], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert "site-packages" in res.stdout
