"""What only the RabbitMQ spout does: its settings and password handling, and its attempt header.
The broker contract (acks, retries, dead letters, drops, kills) is in test_broker_contract.py.

Skipped when RabbitMQ is unreachable, failed instead when CI=true (tests/support/broker_services.py).
"""

from __future__ import annotations

import pytest

from squall.connectors.rabbitmq import ATTEMPTS_HEADER, RabbitMQSpout, _int_header, rabbitmq_url
from tests.support.broker_services import need_rabbitmq, unique
from tests.support.broker_topology import open_fails_without_showing

pika = pytest.importorskip("pika")


def test_settings_from_the_environment_and_passwords_never_shown(monkeypatch):
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


def test_a_wrong_password_fails_at_open_without_showing_it(caplog):
    """The local RabbitMQ knows guest/guest: another password is refused by the broker itself."""
    need_rabbitmq()
    spout = RabbitMQSpout(unique("rmqpw"), "amqp://guest:Sup3r-S3cret-pw@127.0.0.1:5672/%2F")
    text = open_fails_without_showing(spout, "Sup3r-S3cret-pw", caplog)
    assert "amqp://guest:***@127.0.0.1:5672" in text
    assert "ProbableAuthenticationError" in text or "ACCESS_REFUSED" in text, text


def test_attempt_header_survives_odd_values():
    assert _int_header({ATTEMPTS_HEADER: "x"}, ATTEMPTS_HEADER) == 0
    assert _int_header({ATTEMPTS_HEADER: 3}, ATTEMPTS_HEADER) == 3
    assert _int_header({ATTEMPTS_HEADER: -2}, ATTEMPTS_HEADER) == 0
    assert _int_header({}, ATTEMPTS_HEADER) == 0


class _Collector:
    """What a spout's collector records: the msg ids emitted, each one's message (its first
    value, the same on every delivery), and errors reported."""

    def __init__(self) -> None:
        self.ids: list = []
        self.message: dict = {}
        self.errors: list = []

    def emit(self, values, msg_id=None, **_kw):
        self.ids.append(msg_id)
        self.message[msg_id] = repr(values[0])

    def report_error(self, error):
        self.errors.append(error)


def _drive(spout: RabbitMQSpout, out: _Collector, until_acked: int, rng, hold: bool) -> list:
    """Emit and settle like a topology with waves in flight until `until_acked` are acked: each
    round the older two thirds of what is held settle in one ack_batch (in any order, 3 of them
    failed while fewer than 30 have failed, each message once at most: near the end, with few
    held, one failed on 6 deliveries was dead-lettered), the newest wait, now and then two
    stragglers wait a round more, and sometimes the spout is deactivated and activated. Returns
    what is still held."""
    import time

    deadline = time.monotonic() + 60
    held: list = []
    failed: set = set()  # messages failed once already
    while spout.counters.acked < until_acked and time.monotonic() < deadline:
        before = len(out.ids)
        for _ in range(300):  # a wave's worth: about 300 (a call emits up to 64)
            spout.next_tuple()
            if len(out.ids) - before >= 300:
                break
        held += out.ids[before:]
        if len(out.ids) == before:
            time.sleep(0.005)  # nothing came: give the I/O thread time
        if not held:
            continue
        k = len(held) * 2 // 3 if hold or len(out.ids) > before else len(held)
        settle, held = held[:k], held[k:]
        rng.shuffle(settle)
        if len(settle) > 10 and held and rng.random() < 0.2:
            held, settle = settle[-2:] + held, settle[:-2]
        to_fail = [m for m in settle if out.message[m] not in failed][:max(0, min(3, 30 - spout.counters.failed))]
        failed.update(out.message[m] for m in to_fail)
        for msg_id in to_fail:
            spout.fail(msg_id)
        chosen = set(to_fail)
        spout.ack_batch([m for m in settle if m not in chosen])  # a wave's acks come in one call
        if rng.random() < 0.1:
            spout.deactivate()
            time.sleep(0.02)
            spout.activate()
    return held


def test_acks_go_out_as_few_multiple_acks_and_none_before_its_tree(monkeypatch):
    """Acks come shuffled, with trees in flight across batches, failed (republished) messages and
    deactivate/activate in between (pika rejects what it had not dispatched: gaps in the tags).
    Most acks travel as basic.ack(multiple=True); the channel never breaks (an ack of a tag not
    outstanding would close it); no message is acked at the broker before its own tree: when
    the spout closes with trees in flight, exactly the messages not acked go back to the queue,
    and a second spout then acks each of them once."""
    import time
    import zlib
    from random import Random
    from types import SimpleNamespace

    from tests.support.broker_admins import RabbitAdmin
    from tests.support.broker_services import wait_until

    frames = {"multiple": 0, "single": 0}
    orig = pika.adapters.blocking_connection.BlockingChannel.basic_ack

    def counting_ack(ch, delivery_tag=0, multiple=False):
        frames["multiple" if multiple else "single"] += 1
        return orig(ch, delivery_tag, multiple)

    monkeypatch.setattr(pika.adapters.blocking_connection.BlockingChannel, "basic_ack", counting_ack)
    rng = Random(zlib.crc32(b"rmq-multiple-acks"))
    admin = RabbitAdmin()
    try:
        source = admin.source("rmqmulti")
        n = 3000
        admin.publish(source, [b"m%d" % i for i in range(n)])
        first, second = (RabbitMQSpout(source, admin.url, retry_delay_secs=0, max_retries=5) for _ in range(2))
        out, out2 = _Collector(), _Collector()
        context = SimpleNamespace(this_task_index=0, this_component_id="src")
        first.open({"topology.max.spout.pending": 700}, context, out)
        held = sorted(_drive(first, out, 2000, rng, hold=True))
        first.ack_batch(held[2:])  # all but the two oldest trees in flight finish
        held = held[:2]
        first.deactivate()
        time.sleep(0.3)
        first.ack_batch([])  # applies what the I/O thread finished
        acked = first.counters.acked
        counters, errors = first.counters.as_dict(), list(out.errors)
        first.close()
        assert held and 2000 <= acked < n, counters
        assert counters["retried"] == 30 and counters["reconnects"] == 0 and not errors, (counters, errors)
        wait_until(lambda: admin.ready(source) == n - acked, 10,
                   lambda: f"{admin.ready(source)} back in the queue, not {n - acked}")
        assert frames["multiple"] > 0 and frames["single"] + frames["multiple"] < n / 4, frames

        second.open({"topology.max.spout.pending": 700}, context, out2)
        _drive(second, out2, n - acked, rng, hold=False)
        time.sleep(0.2)
        second.ack_batch([])
        assert second.counters.acked == n - acked and not out2.errors, (second.counters.as_dict(), out2.errors)
        second.close()
        assert admin.ready(source) == 0
    finally:
        admin.close()


def test_a_message_published_without_delivery_mode_is_retried_and_dead_lettered():
    """Its copy to the retry queue and then to the dead letters is made persistent: a copy whose
    properties could not be encoded looped the spout's connection and the message went nowhere."""
    import time

    from squall import BasicBolt, Config, FailedException, LocalCluster, TopologyBuilder

    url = need_rabbitmq()
    queue = unique("rmqtransient")
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True)
    ch.basic_publish("", queue, b"transient", pika.BasicProperties())  # no delivery_mode

    class Refuse(BasicBolt):
        def declare_output_fields(self, declarer):
            pass

        def execute(self, t, collector):
            raise FailedException("refused")

    b = TopologyBuilder()
    b.set_spout("in", RabbitMQSpout(queue, url, max_retries=1, retry_delay_secs=0.1))
    b.set_bolt("refuse", Refuse()).shuffle_grouping("in")
    try:
        with LocalCluster(engine="local") as cluster:
            cluster.submit_topology("transient", Config(), b.create_topology())
            for _ in range(400):  # until it is dead-lettered (a bounded wait)
                if ch.queue_declare(f"{queue}.dlq", passive=True).method.message_count == 1:
                    break
                time.sleep(0.05)
        assert ch.queue_declare(f"{queue}.dlq", passive=True).method.message_count == 1
        method, props, body = ch.basic_get(f"{queue}.dlq", auto_ack=True)
        assert body == b"transient" and int(props.headers["squall-attempts"]) == 2
    finally:
        for q in (queue, f"{queue}.retry", f"{queue}.dlq"):
            ch.queue_delete(q)
        conn.close()
