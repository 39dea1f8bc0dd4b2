"""The column spouts of RabbitMQ, Redis Streams and NATS JetStream (RabbitMQColumnSpout,
RedisStreamColumnSpout, JetStreamColumnSpout) against the real brokers: what a spout has received
goes out as one Arrow batch, yet every message is its own tree: acked at the broker once,
retried alone, dead-lettered alone. (KafkaColumnSpout: test_kafka_columns.py.)

Skipped when a broker is unreachable, failed instead when CI=true (tests/support/broker_services.py).
"""

from __future__ import annotations

import pytest

from squall import Config, LocalCluster
from squall.connectors.dead_letters import DL_ERROR, DL_REASON
from squall.connectors.nats import JetStreamColumnSpout
from squall.connectors.rabbitmq import RabbitMQColumnSpout
from squall.connectors.redis import RedisStreamColumnSpout
from tests.support.broker_admins import ADMINS, BROKERS
from tests.support.broker_services import wait_until
from tests.support.broker_topology import Hold, Recorder, scenario_conf, spout_into
from tests.support.column_topology import POISON, ColumnParse, column_topology, run_10k_scenario

N = 10_000
MAX_RETRIES = 3


@pytest.fixture(params=BROKERS)
def admin(request):
    a = ADMINS[request.param]()
    yield a
    a.close()


def test_10k_messages_random_failed_rows_and_a_poison_message(admin, cluster_kwargs):
    """1% of the rows of each columnar bolt fail at random: every message is processed and acked
    at the broker exactly once, nothing is left at the source, and the poison message (failed on
    every pass) is dead-lettered alone after max_retries retries."""
    source = admin.source("col-10k")
    admin.publish(source, [b'{"id": %d}' % i for i in range(N)] + [POISON])
    rec = Recorder()
    spout = admin.spout(source, rec, columns=True, max_retries=MAX_RETRIES, retry_delay_secs=0.2)
    run_10k_scenario(admin, source, spout, rec, cluster_kwargs, N, MAX_RETRIES)


def test_failing_one_row_of_a_big_batch_replays_only_that_message(admin):
    """One row of 10,000 fails once: the spout emits exactly one row again."""
    source = admin.source("col-one")
    admin.publish(source, [b'{"id": %d}' % i for i in range(N)])
    rec = Recorder()
    spout = admin.spout(source, rec, columns=True, retry_delay_secs=0.05)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("col-one", scenario_conf("local", max_pending=N),
                                column_topology(spout, 0.0, 1, ColumnParse(fail_once=4321)))
        wait_until(lambda: rec.n_acked() >= N, 60, lambda: f"acked {rec.n_acked()}/{N}, {rec.counters()}")
        cluster.kill_topology("col-one")
    [counters] = rec.counters()
    assert (counters["emitted"], counters["failed"], counters["retried"], counters["acked"]) == (N + 1, 1, 1, N)
    wait_until(lambda: admin.settled(source), 10, lambda: f"{admin.left(source)} message(s) left at the source")


def test_payloads_that_do_not_decode_are_dead_lettered_with_a_decode_reason(admin):
    """scheme "string": a payload that is not UTF-8 (and, on Redis, an entry without the
    payload field) never reaches a bolt; it is dead-lettered at once with reason "decode"."""
    source = admin.source("col-bad")
    admin.publish(source, [b'{"id": 0}', b"\xff\xfe not utf-8", b'{"id": 1}'])
    no_payload = admin.publish_without_payload(source)
    admin.publish(source, [b'{"id": 2}'])
    n_bad = 1 + (no_payload is not None)
    rec = Recorder()
    spout = admin.spout(source, rec, columns=True)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("col-bad", scenario_conf("local", 100), column_topology(spout, 0.0))
        wait_until(lambda: rec.n_acked() >= 3 and len(rec.dead) >= n_bad, 30,
                   lambda: f"acked {dict(rec.acked)}, dead {[str(d[2]) for d in rec.dead]}")
        errors = cluster.get_errors("col-bad")
        cluster.kill_topology("col-bad")
    assert sorted(rec.acked) == [0, 1, 2]
    dead = dict(admin.dead_letters(source))
    assert len(dead) == n_bad and {info[DL_REASON] for info in dead.values()} == {"decode"}
    assert "not valid UTF-8" in dead[b"\xff\xfe not utf-8"][DL_ERROR]
    assert not [e for e in errors if e.component != "src"], errors  # nothing reached the bolts
    wait_until(lambda: admin.settled(source), 10, lambda: f"{admin.left(source)} message(s) left at the source")


def test_the_column_spout_holds_at_most_max_spout_pending(admin):
    """max.spout.pending 5 and a (tuple) bolt that holds every row: 5 messages are emitted, no
    more, and closing the spout acks none of them."""
    source = admin.source("col-pending")
    admin.publish(source, [b"m%d" % i for i in range(20)])
    rec = Recorder()
    conf = Config()
    conf.set_max_spout_pending(5)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("col-pending", conf, spout_into(admin.spout(source, rec, columns=True), Hold()))
        wait_until(lambda: rec.spouts and rec.spouts[0].counters.emitted >= 5, 10, "5 emitted")
        cluster.wait_idle(10)
        assert rec.spouts[0].counters.emitted == 5 and rec.spouts[0].inflight == 5
        cluster.kill_topology("col-pending")
    assert admin.left(source) == 20


@pytest.mark.parametrize("make", [
    lambda **kw: RabbitMQColumnSpout("q", "amqp://guest:guest@127.0.0.1:9/%2F", **kw),
    lambda **kw: RedisStreamColumnSpout("s", "g", "redis://127.0.0.1:9/0", **kw),
    lambda **kw: JetStreamColumnSpout("s", url="nats://127.0.0.1:9", **kw),
], ids=["rabbitmq", "redis", "nats"])
@pytest.mark.parametrize(("kwargs", "says"), [
    ({"scheme": "json"}, "decode it in a ColumnarBolt"),
    ({"scheme": lambda b: b}, "decode it in a ColumnarBolt"),
    ({"meta_field": "meta"}, "no meta_field"),
])
def test_what_a_column_spout_cannot_emit_is_refused_at_once(make, kwargs, says):
    with pytest.raises(ValueError, match=says):
        make(**kwargs)


def test_the_payload_column_is_named_after_the_declared_field():
    assert RabbitMQColumnSpout("q").fields == ["value"]
    assert RabbitMQColumnSpout("q", fields=("body",)).fields == ["body"]
