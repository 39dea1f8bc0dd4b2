"""RabbitMQSpout against the real RabbitMQ on 127.0.0.1:5672 (guest/guest); both engines.

Skipped when RabbitMQ is unreachable, failed instead when CI=true (tests/support/connector_helpers.py).
"""

from __future__ import annotations

import logging
import os
import signal

import pytest

from squall import Bolt, Config, LocalCluster, TopologyBuilder
from squall.connectors.base import DL_ATTEMPTS, DL_ERROR, DL_REASON, DL_SOURCE, dead_letter_info
from squall.connectors.rabbitmq import ATTEMPTS_HEADER, RabbitMQSpout, rabbitmq_url
from tests.support.connector_helpers import (
    FileSink,
    Recorder,
    Recording,
    TcpProxy,
    captured_ids,
    check_scenario,
    need_rabbitmq,
    read_ids,
    scenario_conf,
    start_worker,
    two_bolt_topology,
    unique,
    wait_until,
)

pika = pytest.importorskip("pika")

N = 10_000
MAX_RETRIES = 3


class RecRabbit(Recording, RabbitMQSpout):
    pass


class Admin:
    """A separate connection for the test's own publishing and inspecting."""

    def __init__(self, url: str):
        self.conn = pika.BlockingConnection(pika.URLParameters(url))
        self.ch = self.conn.channel()
        self.fast = self.conn.channel()
        self.made: list[str] = []

    def queue(self, name: str) -> str:
        self.ch.queue_declare(name, durable=True)
        self.made += [name, f"{name}.retry", f"{name}.dlq"]
        return name

    def publish(self, queue: str, bodies: list[bytes], headers: dict | None = None) -> None:
        """Publish without waiting for a confirm per message (slow in pika), then wait until the
        queue holds them all (nothing consumes it yet)."""
        start = self.ready(queue)
        props = pika.BasicProperties(delivery_mode=2, headers=headers)
        for body in bodies:
            self.fast.basic_publish("", queue, body, props)
        wait_until(lambda: self.ready(queue) >= start + len(bodies), 30, f"{len(bodies)} messages in {queue}")

    def ready(self, queue: str) -> int:
        return self.ch.queue_declare(queue, passive=True).method.message_count

    def take_all(self, queue: str) -> list[tuple[bytes, dict]]:
        out = []
        while True:
            method, props, body = self.ch.basic_get(queue, auto_ack=True)
            if method is None:
                return out
            out.append((body, props.headers or {}))

    def close(self) -> None:
        for q in self.made:
            try:
                self.ch.queue_delete(q)
            except Exception:  # noqa: BLE001 - it may not exist
                self.ch = self.conn.channel()
        self.conn.close()


@pytest.fixture
def admin():
    a = Admin(need_rabbitmq())
    yield a
    a.close()


def test_10k_messages_random_failures_and_a_poison_message(admin, cluster_kwargs):
    queue = admin.queue(unique("rmq10k"))
    admin.publish(queue, [b'{"id": %d}' % i for i in range(N)])
    admin.publish(queue, [b'{"id": "poison", "poison": true}'])
    rec = Recorder()
    spout = RecRabbit(queue, need_rabbitmq(), scheme="json", max_retries=MAX_RETRIES, retry_delay_secs=0.2)
    spout.recorder = rec
    engine = cluster_kwargs["engine"]
    with LocalCluster(capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("rmq", scenario_conf(engine), two_bolt_topology(spout, fail_rate=0.01))
        wait_until(lambda: rec.n_acked() >= N and rec.dead, 60,
                   lambda: f"acked {rec.n_acked()}/{N}, dead {len(rec.dead)}, spouts {rec.counters()}")
        seen = captured_ids(cluster, "rmq")
        cluster.kill_topology("rmq")  # closes the connection: anything unacked would go back to the queue
    check_scenario(rec, seen, N, "poison", MAX_RETRIES)
    assert admin.ready(queue) == 0 and admin.ready(f"{queue}.retry") == 0
    dead = admin.take_all(f"{queue}.dlq")
    assert len(dead) == 1
    body, headers = dead[0]
    info = dead_letter_info(headers)
    assert body == b'{"id": "poison", "poison": true}'
    assert info[DL_REASON] == "error" and info[DL_ATTEMPTS] == str(MAX_RETRIES + 1)
    assert "ValueError: poison message 'poison' cannot be parsed" in info[DL_ERROR]
    assert info[DL_SOURCE] == queue


def test_bad_payloads_are_dead_lettered_with_a_decode_reason(admin, cluster_kwargs):
    queue = admin.queue(unique("rmqbad"))
    admin.publish(queue, [b'{"id": 0}', b"\xff\xfe not utf-8", b'{"id": 1', b'{"id": 2}'])
    rec = Recorder()
    spout = RecRabbit(queue, need_rabbitmq(), scheme="json", max_retries=1, retry_delay_secs=0.1)
    spout.recorder = rec
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("bad", scenario_conf(cluster_kwargs["engine"], 100), two_bolt_topology(spout, 0))
        wait_until(lambda: rec.n_acked() >= 2 and len(rec.dead) >= 2, 30,
                   lambda: f"acked {dict(rec.acked)}, dead {[str(d[2]) for d in rec.dead]}")
        errors = cluster.get_errors("bad")
        cluster.kill_topology("bad")
    assert sorted(rec.acked) == [0, 2]
    dead = {body: dead_letter_info(h) for body, h in admin.take_all(f"{queue}.dlq")}
    assert set(dead) == {b"\xff\xfe not utf-8", b'{"id": 1'}
    assert dead[b"\xff\xfe not utf-8"][DL_REASON] == "decode"
    assert "not valid UTF-8" in dead[b"\xff\xfe not utf-8"][DL_ERROR]
    assert dead[b'{"id": 1'][DL_REASON] == "decode"
    assert "not valid JSON" in dead[b'{"id": 1'][DL_ERROR]
    assert dead[b'{"id": 1'][DL_ATTEMPTS] == "1"  # decoding is not retried
    assert not [e for e in errors if e.component != "src"], errors  # nothing reached the bolts
    assert admin.ready(queue) == 0


def test_prefetch_is_max_spout_pending(admin):
    """With max.spout.pending 5 and a bolt that holds every tuple, the broker hands out 5."""

    class Hold(Bolt):
        def prepare(self, conf, context, collector):
            self.held = []

        def declare_output_fields(self, d):
            pass

        def execute(self, t):
            self.held.append(t)

    queue = admin.queue(unique("rmqprefetch"))
    admin.publish(queue, [b"m%d" % i for i in range(20)])
    rec = Recorder()
    spout = RecRabbit(queue, need_rabbitmq())
    spout.recorder = rec
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("hold", Hold()).shuffle_grouping("src")
    conf = Config()
    conf.set_max_spout_pending(5)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("prefetch", conf, b.create_topology())
        wait_until(lambda: rec.spouts and rec.spouts[0].counters.emitted >= 5, 10, "5 emitted")
        cluster.wait_idle(10)
        assert rec.spouts[0].counters.emitted == 5
        assert admin.ready(queue) == 15  # 5 unacked at this spout, 15 still in the queue
        cluster.kill_topology("prefetch")
    assert admin.ready(queue) == 20  # closing handed the 5 back


def test_retry_carries_the_attempt_count_in_a_header(admin):
    """A message whose tree fails is republished with x-squall-attempts; the bolt sees it grow."""

    class FailTwice(Bolt):
        def prepare(self, conf, context, collector):
            self.c = collector

        def declare_output_fields(self, d):
            d.declare(["attempts"])

        def execute(self, t):
            meta = t[1]
            if meta["attempts"] <= 2:
                self.c.fail(t)
                return
            self.c.emit([meta["attempts"]], anchors=t)
            self.c.ack(t)

    queue = admin.queue(unique("rmqattempts"))
    admin.publish(queue, [b'{"id": 0}'])
    rec = Recorder()
    spout = RecRabbit(queue, need_rabbitmq(), scheme="json", meta_field="meta", max_retries=5, retry_delay_secs=0.05)
    spout.recorder = rec
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("f", FailTwice()).shuffle_grouping("src")
    with LocalCluster(engine="local", capture=True) as cluster:
        cluster.submit_topology("attempts", Config(), b.create_topology())
        wait_until(lambda: rec.acked[0] == 1, 20, lambda: f"spouts {rec.counters()}")
        out = cluster.coordinator("attempts").captured["f"]["default"]
        cluster.kill_topology("attempts")
    assert [v for vals in out.values() for v in vals] == [[3]]
    assert rec.spouts[0].counters.retried == 2


def test_connection_drop_redelivers_unacked_messages(admin):
    """Cut the spout's connection mid-stream: RabbitMQ requeues what it held, the spout
    reconnects, and every message is processed and acked in the end."""
    n = 3000
    queue = admin.queue(unique("rmqdrop"))
    admin.publish(queue, [b'{"id": %d}' % i for i in range(n)])
    proxy = TcpProxy("127.0.0.1", 5672)
    rec = Recorder()
    spout = RecRabbit(queue, f"amqp://guest:guest@127.0.0.1:{proxy.port}/%2F", scheme="json")
    spout.recorder = rec
    try:
        with LocalCluster(engine="local", capture=True) as cluster:
            conf = Config()
            conf.set_max_spout_pending(200)
            sink = FileSink(os.devnull, delay_ms=0.5)
            cluster.submit_topology("drop", conf, two_bolt_topology(spout, 0.0, sink=sink, parallelism=1))
            wait_until(lambda: rec.n_acked() >= 500, 30, lambda: f"acked {rec.n_acked()}")
            assert rec.n_acked() < n, "finished before the drop: the test proves nothing"
            assert proxy.drop() >= 1
            wait_until(lambda: rec.n_acked() >= n, 60, lambda: f"acked {rec.n_acked()}/{n}, {rec.counters()}")
            errors = cluster.get_errors("drop")
            cluster.kill_topology("drop")
    finally:
        proxy.close()
    assert set(rec.acked) == set(range(n))
    counters = rec.spouts[0].counters
    assert counters.reconnects >= 1
    assert any("connection to" in e.error and "lost" in e.error for e in errors), errors
    assert admin.ready(queue) == 0


def test_kill_and_restart_loses_nothing(admin, tmp_path):
    n = 2000
    queue = admin.queue(unique("rmqkill"))
    admin.publish(queue, [b'{"id": %d}' % i for i in range(n)])
    out = tmp_path / "out.txt"
    worker = start_worker("rabbitmq", queue, out, delay_ms=1)
    try:
        wait_until(lambda: sum(read_ids(out).values()) >= n // 4, 60, lambda: f"{sum(read_ids(out).values())} lines")
        assert worker.poll() is None
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
        before = set(read_ids(out))
        assert len(before) < n, "finished before the kill: the test proves nothing"
        worker = start_worker("rabbitmq", queue, out, delay_ms=1)
        wait_until(lambda: set(read_ids(out)) >= set(range(n)), 90,
                   lambda: f"{len(set(range(n)) - set(read_ids(out)))} ids missing; stderr: "
                           f"{(tmp_path / 'out.txt.stderr').read_text()[-2000:]}")
    finally:
        if worker.poll() is None:
            worker.terminate()
            worker.wait(30)
    assert set(read_ids(out)) == set(range(n))
    assert admin.ready(queue) == 0


def test_settings_from_the_environment_and_passwords_never_shown(monkeypatch, caplog):
    for var in ("AMQP_URL", "RABBITMQ_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RABBITMQ_HOST", "10.1.2.3")
    monkeypatch.setenv("RABBITMQ_PORT", "5673")
    monkeypatch.setenv("RABBITMQ_USER", "alice")
    monkeypatch.setenv("RABBITMQ_PASSWORD", "pa/ss:wörd")
    monkeypatch.setenv("RABBITMQ_VHOST", "prod")
    url = rabbitmq_url().reveal()
    assert pika.URLParameters(url).credentials.password == "pa/ss:wörd"
    assert pika.URLParameters(url).host == "10.1.2.3" and pika.URLParameters(url).port == 5673
    assert pika.URLParameters(url).virtual_host == "prod"
    spout = RabbitMQSpout("q")
    assert spout.url == "amqp://alice:***@10.1.2.3:5673/prod"
    assert "pa" not in repr(spout.__dict__.get("_url")) and "ss" not in repr(spout)
    monkeypatch.setenv("AMQP_URL", "amqp://bob:hunter2@127.0.0.1:5672/%2F")
    assert rabbitmq_url().reveal() == "amqp://bob:hunter2@127.0.0.1:5672/%2F"
    assert rabbitmq_url("amqp://carol@h:1/v", password="s3cret").reveal() == "amqp://carol:s3cret@h:1/v"


def test_a_wrong_password_fails_at_open_without_showing_it(admin, caplog):
    caplog.set_level(logging.DEBUG)
    spout = RabbitMQSpout(unique("rmqpw"), "amqp://guest:Sup3r-S3cret-pw@127.0.0.1:5672/%2F")
    b = TopologyBuilder()
    b.set_spout("src", spout)
    with LocalCluster(engine="local") as cluster:
        with pytest.raises(ConnectionError) as ei:
            cluster.submit_topology("pw", Config(), b.create_topology())
    assert "amqp://guest:***@127.0.0.1:5672" in str(ei.value)
    assert "Sup3r-S3cret-pw" not in str(ei.value)
    assert "Sup3r-S3cret-pw" not in caplog.text


def test_attempt_header_survives_odd_values():
    from squall.connectors.rabbitmq import _int_header

    assert _int_header({ATTEMPTS_HEADER: "x"}, ATTEMPTS_HEADER) == 0
    assert _int_header({ATTEMPTS_HEADER: 3}, ATTEMPTS_HEADER) == 3
    assert _int_header({}, ATTEMPTS_HEADER) == 0


# -- the shared connector pieces (squall/connectors/base.py); no broker needed ------------------


def test_schemes_decode_or_say_why():
    from squall.connectors.base import DecodeError, Scheme

    assert Scheme("string").decode("é".encode()) == "é"
    assert Scheme("json").decode(b'{"a": [1, 2]}') == {"a": [1, 2]}
    assert Scheme("bytes").decode(b"\x80\x81") == b"\x80\x81"
    with pytest.raises(DecodeError, match=r"not valid UTF-8 \(invalid start byte at byte 0\)"):
        Scheme("string").decode(b"\xff")
    with pytest.raises(DecodeError, match=r"not valid JSON \(Expecting value at line 1 column 1\)"):
        Scheme("json").decode(b"nope")
    with pytest.raises(DecodeError, match=r"scheme fussy cannot decode payload \(KeyError: 'x'\)"):
        def fussy(b):
            return {}["x"]

        Scheme(fussy).decode(b"x" * 100)
    with pytest.raises(ValueError, match="unknown scheme 'pickle'"):
        Scheme("pickle")


def test_failures_and_redaction():
    from squall import FailReason
    from squall.connectors.base import DL_COMPONENT, DL_ERROR, Failure, one_line, redact_url, scrub

    f = Failure.from_reason(FailReason("error", "parse", 3, "ValueError: bad\nline two"), 4)
    fields = f.fields("q", 17)
    assert fields[DL_ERROR] == "ValueError: bad | line two" and fields[DL_COMPONENT] == "parse"
    assert Failure.from_reason(None, 1).kind == "failed"
    assert len(one_line("x" * 5000)) == 2000
    assert redact_url("amqp://u:p%40ss@h:5672/v") == "amqp://u:***@h:5672/v"
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"
    assert redact_url("nats://a:1,nats://tok@b:2") == "nats://a:1,nats://***@b:2"
    assert scrub("auth failed for p@ss and p%40ss", ["p@ss"]) == "auth failed for *** and ***"
