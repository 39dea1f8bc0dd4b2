"""JetStreamSpout against the real NATS JetStream on 127.0.0.1:4222; both engines.

Skipped when NATS is unreachable, failed instead when CI=true (tests/support/connector_helpers.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys

import pytest

from squall import Bolt, Config, LocalCluster, TopologyBuilder
from squall.connectors.base import DL_ATTEMPTS, DL_ERROR, DL_REASON, DL_SOURCE, dead_letter_info
from squall.connectors.nats import JetStreamSpout
from tests.support.connector_helpers import (
    ROOT,
    FileSink,
    Recorder,
    Recording,
    TcpProxy,
    captured_ids,
    check_scenario,
    need_nats,
    read_ids,
    scenario_conf,
    start_worker,
    two_bolt_topology,
    unique,
    wait_until,
)

nats = pytest.importorskip("nats")

N = 10_000
MAX_RETRIES = 3
DURABLE = "squall-test"


class RecNats(Recording, JetStreamSpout):
    pass


class Admin:
    """The test's own NATS connection, on its own event loop (each call runs to completion)."""

    def __init__(self, url: str):
        self.url = url
        self.loop = asyncio.new_event_loop()
        self.nc = self.run(nats.connect(url))
        self.js = self.nc.jetstream()
        self.made: list[str] = []

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def stream(self, prefix: str) -> str:
        name = unique(prefix)
        self.run(self.js.add_stream(name=name, subjects=[name]))
        self.made += [name, f"{name}_DLQ"]
        return name

    def publish(self, subject: str, payloads: list[bytes]) -> None:
        async def go():
            start = (await self.js.stream_info(subject)).state.messages
            for p in payloads:
                await self.nc.publish(subject, p)
            await self.nc.flush()
            for _ in range(600):
                if (await self.js.stream_info(subject)).state.messages >= start + len(payloads):
                    return
                await asyncio.sleep(0.05)
            raise AssertionError(f"{len(payloads)} messages never reached stream {subject}")

        self.run(go())

    def consumer(self, stream: str, durable: str = DURABLE):
        return self.run(self.js.consumer_info(stream, durable))

    def settled(self, stream: str, durable: str = DURABLE) -> bool:
        info = self.consumer(stream, durable)
        return info.num_ack_pending == 0 and info.num_pending == 0

    def dead_letters(self, stream: str) -> list[tuple[bytes, dict]]:
        async def go():
            dlq = f"{stream}_DLQ"
            n = (await self.js.stream_info(dlq)).state.messages
            out = []
            for seq in range(1, n + 1):
                raw = await self.js.get_msg(dlq, seq)
                out.append((raw.data or b"", raw.headers or {}))
            return out

        return self.run(go())

    def close(self) -> None:
        for name in self.made:
            try:
                self.run(self.js.delete_stream(name))
            except Exception:  # noqa: BLE001 - it may not exist
                pass
        self.run(self.nc.close())
        self.loop.close()


@pytest.fixture
def admin():
    a = Admin(need_nats())
    yield a
    a.close()


def test_10k_messages_random_failures_and_a_poison_message(admin, cluster_kwargs):
    stream = admin.stream("nats10k")
    admin.publish(stream, [b'{"id": %d}' % i for i in range(N)] + [b'{"id": "poison", "poison": true}'])
    rec = Recorder()
    spout = RecNats(stream, durable=DURABLE, url=need_nats(), scheme="json", max_retries=MAX_RETRIES,
                    retry_delay_secs=0.2)
    spout.recorder = rec
    with LocalCluster(capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("nats", scenario_conf(cluster_kwargs["engine"]), two_bolt_topology(spout, 0.01))
        wait_until(lambda: rec.n_acked() >= N and rec.dead, 60,
                   lambda: f"acked {rec.n_acked()}/{N}, dead {len(rec.dead)}, spouts {rec.counters()}")
        seen = captured_ids(cluster, "nats")
        cluster.kill_topology("nats")
    check_scenario(rec, seen, N, "poison", MAX_RETRIES)
    wait_until(lambda: admin.settled(stream), 10, lambda: f"consumer {admin.consumer(stream)}")
    [(body, headers)] = admin.dead_letters(stream)
    info = dead_letter_info(headers)
    assert body == b'{"id": "poison", "poison": true}'
    assert info[DL_REASON] == "error" and info[DL_ATTEMPTS] == str(MAX_RETRIES + 1)
    assert "ValueError: poison message 'poison' cannot be parsed" in info[DL_ERROR]
    assert info[DL_SOURCE] == stream


def test_bad_payloads_are_dead_lettered_with_a_decode_reason(admin, cluster_kwargs):
    stream = admin.stream("natsbad")
    admin.publish(stream, [b'{"id": 0}', b"\xff\xfe not utf-8", b'{"id": 1', b'{"id": 2}'])
    rec = Recorder()
    spout = RecNats(stream, durable=DURABLE, url=need_nats(), scheme="json", max_retries=1, retry_delay_secs=0.1)
    spout.recorder = rec
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("bad", scenario_conf(cluster_kwargs["engine"], 100), two_bolt_topology(spout, 0))
        wait_until(lambda: rec.n_acked() >= 2 and len(rec.dead) >= 2, 30,
                   lambda: f"acked {dict(rec.acked)}, dead {[str(d[2]) for d in rec.dead]}")
        cluster.kill_topology("bad")
    assert sorted(rec.acked) == [0, 2]
    dead = {body: dead_letter_info(h) for body, h in admin.dead_letters(stream)}
    assert set(dead) == {b"\xff\xfe not utf-8", b'{"id": 1'}
    assert dead[b"\xff\xfe not utf-8"][DL_REASON] == "decode"
    assert "not valid UTF-8" in dead[b"\xff\xfe not utf-8"][DL_ERROR]
    assert dead[b'{"id": 1'][DL_REASON] == "decode" and "not valid JSON" in dead[b'{"id": 1'][DL_ERROR]
    wait_until(lambda: admin.settled(stream), 10, lambda: f"consumer {admin.consumer(stream)}")


def test_consumer_settings_follow_the_topology(admin):
    """AckWait is the message timeout, max_deliver is max_retries + 1, max_ack_pending is
    max.spout.pending; an existing durable is updated to match."""
    stream = admin.stream("natscfg")
    spout = JetStreamSpout(stream, durable=DURABLE, url=need_nats(), max_retries=4)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    for timeout, pending in ((7, 123), (9, 45)):
        conf = Config()
        conf.set_message_timeout_secs(timeout)
        conf.set_max_spout_pending(pending)
        with LocalCluster(engine="local") as cluster:
            cluster.submit_topology("cfg", conf, b.create_topology())
            c = admin.consumer(stream).config
            cluster.kill_topology("cfg")
        assert (c.ack_wait, c.max_deliver, c.max_ack_pending) == (timeout, 5, pending)
        assert str(getattr(c.ack_policy, "value", c.ack_policy)) == "explicit" and c.durable_name == DURABLE


def test_messages_in_flight_for_long_are_not_redelivered(admin):
    """A tree that runs longer than the AckWait: the spout sends in-progress acks, so the
    server does not hand the message out again."""

    class Hold(Bolt):
        def prepare(self, conf, context, collector):
            self.held = []

        def declare_output_fields(self, d):
            pass

        def execute(self, t):
            self.held.append(t)

    stream = admin.stream("natshold")
    admin.publish(stream, [b"x"])
    rec = Recorder()
    spout = RecNats(stream, durable=DURABLE, url=need_nats(), ack_wait_secs=1.0)
    spout.recorder = rec
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("hold", Hold()).shuffle_grouping("src")
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("hold", Config(), b.create_topology())
        wait_until(lambda: rec.spouts and rec.spouts[0].counters.extra.get("touched", 0) >= 6, 20, "6 touches")
        info = admin.consumer(stream)
        emitted = rec.spouts[0].counters.emitted
        cluster.kill_topology("hold")
    assert emitted == 1 and info.num_redelivered == 0 and info.num_ack_pending == 1


def test_a_message_whose_deliveries_ran_out_is_dead_lettered_as_lost(admin):
    """Another consumer of the durable took the message and died on its last allowed delivery:
    the server stops delivering it and says so in an advisory; the spout dead-letters it."""
    stream = admin.stream("natslost")
    spout = RecNats(stream, durable=DURABLE, url=need_nats(), max_retries=0)
    rec = Recorder()
    spout.recorder = rec
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("sink", FileSink(os.devnull)).shuffle_grouping("src")
    conf = Config()
    conf.set_message_timeout_secs(2)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("lost", conf, b.create_topology())  # creates the durable: max_deliver 1
        cluster.deactivate("lost")  # the spout stops fetching; the "dead" consumer gets the message
        wait_until(lambda: admin.consumer(stream).num_waiting == 0, 10, "the spout's last pull request to end")

        async def take_and_die():
            psub = await admin.js.pull_subscribe_bind(durable=DURABLE, stream=stream)
            await admin.js.publish(stream, b"doomed")
            for _ in range(20):
                try:
                    msgs = await psub.fetch(1, timeout=0.5)
                except TimeoutError:
                    continue
                return msgs[0].data
            raise AssertionError("the dead consumer never got the message")

        assert admin.run(take_and_die()) == b"doomed"
        cluster.activate("lost")  # the spout pulls again: the server finds the deliveries ran out
        wait_until(lambda: admin.dead_letters(stream), 20, "a dead letter")
        cluster.kill_topology("lost")  # a deactivated spout calls its hooks when it closes
    [(key, _m, failure)] = rec.dead
    assert key == b"doomed" and failure.kind == "lost"
    [(body, headers)] = admin.dead_letters(stream)
    assert body == b"doomed" and dead_letter_info(headers)[DL_REASON] == "lost"


def test_connection_drop_loses_nothing(admin):
    n = 3000
    stream = admin.stream("natsdrop")
    admin.publish(stream, [b'{"id": %d}' % i for i in range(n)])
    proxy = TcpProxy("127.0.0.1", 4222)
    rec = Recorder()
    spout = RecNats(stream, durable=DURABLE, url=f"nats://127.0.0.1:{proxy.port}", scheme="json")
    spout.recorder = rec
    try:
        with LocalCluster(engine="local") as cluster:
            conf = Config()
            conf.set_max_spout_pending(200)
            conf.set_message_timeout_secs(5)
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
    wait_until(lambda: admin.settled(stream), 20, lambda: f"consumer {admin.consumer(stream)}")


def test_kill_and_restart_loses_nothing(admin, tmp_path):
    """SIGKILL the topology process mid-stream; after a restart with the same durable the server
    redelivers what the dead process held once its AckWait (the 3 s message timeout) passes."""
    n = 2000
    stream = admin.stream("natskill")
    admin.publish(stream, [b'{"id": %d}' % i for i in range(n)])
    out = tmp_path / "out.txt"
    worker = start_worker("nats", stream, out, delay_ms=1)
    try:
        wait_until(lambda: sum(read_ids(out).values()) >= n // 4, 60, lambda: f"{sum(read_ids(out).values())} lines")
        assert worker.poll() is None
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
        assert len(set(read_ids(out))) < n, "finished before the kill: the test proves nothing"
        assert admin.consumer(stream, "squall-kill").num_ack_pending > 0, "the killed process held nothing"
        worker = start_worker("nats", stream, out, delay_ms=1)
        wait_until(lambda: set(read_ids(out)) >= set(range(n)) and admin.settled(stream, "squall-kill"), 90,
                   lambda: f"{len(set(range(n)) - set(read_ids(out)))} ids missing, consumer "
                           f"{admin.consumer(stream, 'squall-kill')}; stderr: "
                           f"{(tmp_path / 'out.txt.stderr').read_text()[-2000:]}")
    finally:
        if worker.poll() is None:
            worker.terminate()
            worker.wait(30)
    assert set(read_ids(out)) == set(range(n))


def test_settings_from_the_environment_and_secrets_never_shown(monkeypatch):
    monkeypatch.setenv("NATS_URL", "nats://a.example:4222,nats://bob:hunter2@b.example:4223")
    monkeypatch.setenv("NATS_USER", "carol")
    monkeypatch.setenv("NATS_PASSWORD", "pa/ss:word")
    monkeypatch.setenv("NATS_TOKEN", "t0ken-value")
    spout = JetStreamSpout("S")
    assert spout.url == "nats://a.example:4222,nats://bob:***@b.example:4223"
    assert spout.user == "carol" and spout._password.reveal() == "pa/ss:word"
    for text in (repr(spout), repr(spout.__dict__)):
        assert "hunter2" not in text
        assert "pa/ss:word" not in text and "t0ken-value" not in text
    assert JetStreamSpout("S", url="nats://tok3n@h:1").url == "nats://***@h:1"


def test_a_wrong_password_fails_at_open_without_showing_it(admin, caplog):
    """The server on this machine has no auth, so use a server that does not exist: the error
    names the URL without its password."""
    caplog.set_level(logging.DEBUG)
    spout = JetStreamSpout("S", url="nats://bob:Sup3r-S3cret-pw@127.0.0.1:1", connect_timeout_secs=1)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    with LocalCluster(engine="local") as cluster, pytest.raises(ConnectionError) as ei:
        cluster.submit_topology("pw", Config(), b.create_topology())
    assert "nats://bob:***@127.0.0.1:1" in str(ei.value)
    assert "Sup3r-S3cret-pw" not in str(ei.value) and "Sup3r-S3cret-pw" not in caplog.text


def test_the_module_name_does_not_shadow_nats_py():
    code = ("import squall.connectors.nats as c, squall.connectors.nats_jetstream as s, nats;"
            "assert hasattr(nats, 'connect') and s.nats is nats and c.JetStreamSpout is s.JetStreamSpout;"
            "print(nats.__file__)")
    for order in (code, "import nats; " + code):
        res = subprocess.run([sys.executable, "-c", order], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert "site-packages" in res.stdout
