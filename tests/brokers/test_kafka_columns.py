"""KafkaColumnSpout against a real Kafka-protocol broker (Tansu, or SQUALL_KAFKA_BOOTSTRAP): each
poll is one Arrow batch, yet every record is its own tree: acked at the broker once, retried
alone, dead-lettered alone, committed only up to the first record not done."""

from __future__ import annotations

from collections import Counter

import pytest

from squall import Config, LocalCluster
from squall.connectors.dead_letters import DL_REASON
from squall.connectors.kafka import KafkaColumnSpout
from tests.support.broker_services import wait_until
from tests.support.broker_topology import Hold, Recorder, scenario_conf, spout_into
from tests.support.column_topology import POISON, ColumnParse, column_topology, run_10k_scenario
from tests.support.kafka_admin import kafka_spout

N = 10_000
MAX_RETRIES = 3


def test_10k_records_random_failed_rows_and_a_poison_record(kafka_admin, cluster_kwargs):
    """1% of the rows of each columnar bolt fail at random: every record is processed and acked
    at the broker exactly once, the offsets are committed to the log end, and the poison record
    (failed on every pass) is dead-lettered alone after max_retries retries."""
    source = kafka_admin.source("col-10k")
    kafka_admin.publish(source, [b'{"id": %d}' % i for i in range(N)] + [POISON])
    rec = Recorder()
    spout = kafka_spout(kafka_admin.url, source, recorder=rec, columns=True, max_retries=MAX_RETRIES,
                        retry_delay_secs=0.2)
    run_10k_scenario(kafka_admin, source, spout, rec, cluster_kwargs, N, MAX_RETRIES)


def test_failing_one_row_of_a_big_poll_replays_only_that_record(kafka_admin):
    """One row of a 10,000-record poll fails once: the spout emits exactly one row again."""
    source = kafka_admin.source("col-one")
    kafka_admin.publish(source, [b'{"id": %d}' % i for i in range(N)])
    rec = Recorder()
    spout = kafka_spout(kafka_admin.url, source, recorder=rec, columns=True, retry_delay_secs=0.05)
    conf = scenario_conf("local", max_pending=N)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("col-one", conf, column_topology(spout, 0.0, 1, ColumnParse(fail_once=4321)))
        wait_until(lambda: rec.n_acked() >= N, 60, lambda: f"acked {rec.n_acked()}/{N}, {rec.counters()}")
        cluster.kill_topology("col-one")
    [counters] = rec.counters()
    assert (counters["emitted"], counters["failed"], counters["retried"], counters["acked"]) == (N + 1, 1, 1, N)
    assert kafka_admin.left(source) == 0


def test_records_that_do_not_decode_are_dead_lettered_with_a_decode_reason(kafka_admin):
    """scheme "string": a record that is not UTF-8, and one without a value, never reach a bolt;
    they are dead-lettered at once with reason "decode", and the others are acked."""
    source = kafka_admin.source("col-bad")
    kafka_admin.publish(source, [b'{"id": 0}', b"\xff\xfe not utf-8", b'{"id": 1}'])
    kafka_admin.publish_without_payload(source)
    kafka_admin.publish(source, [b'{"id": 2}'])
    rec = Recorder()
    spout = kafka_spout(kafka_admin.url, source, recorder=rec, columns=True)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("col-bad", scenario_conf("local", 100), column_topology(spout, 0.0))
        wait_until(lambda: rec.n_acked() >= 3 and len(rec.dead) >= 2, 30,
                   lambda: f"acked {dict(rec.acked)}, dead {[str(d[2]) for d in rec.dead]}")
        errors = cluster.get_errors("col-bad")
        cluster.kill_topology("col-bad")
    assert sorted(rec.acked) == [0, 1, 2]
    dead = dict(kafka_admin.dead_letters(source))
    assert set(dead) == {b"\xff\xfe not utf-8", None}
    assert {info[DL_REASON] for info in dead.values()} == {"decode"}
    assert "not valid UTF-8" in dead[b"\xff\xfe not utf-8"]["squall-error"]
    assert "no value" in dead[None]["squall-error"]
    assert not [e for e in errors if e.component != "src"], errors
    wait_until(lambda: kafka_admin.settled(source), 10, lambda: f"{kafka_admin.left(source)} record(s) uncommitted")


def test_the_column_spout_holds_at_most_max_spout_pending(kafka_admin):
    """max.spout.pending 5 and a bolt that holds every row: 5 records are emitted, no more, and
    nothing is committed."""
    source = kafka_admin.source("col-pending")
    kafka_admin.publish(source, [b"m%d" % i for i in range(20)])
    rec = Recorder()
    conf = Config()
    conf.set_max_spout_pending(5)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("col-pending", conf, spout_into(kafka_spout(kafka_admin.url, source, recorder=rec,
                                                                            columns=True), Hold()))
        wait_until(lambda: rec.spouts and rec.spouts[0].counters.emitted >= 5, 10, "5 emitted")
        cluster.wait_idle(10)
        assert rec.spouts[0].counters.emitted == 5
        assert rec.spouts[0].inflight == 5
        cluster.kill_topology("col-pending")
    assert kafka_admin.left(source) == 20


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"scheme": "json"}, "decode it in a ColumnarBolt"),
    ({"scheme": lambda b: b}, "decode it in a ColumnarBolt"),
    ({"meta_field": "meta"}, "no meta_field"),
])
def test_what_a_column_spout_cannot_emit_is_refused_at_once(kwargs, says):
    with pytest.raises(ValueError, match=says):
        KafkaColumnSpout("127.0.0.1:9", ["t"], "g", **kwargs)


def test_two_topics_in_one_spout(kafka_admin):
    """Records of two topics come out in one batch with their own topic, partition and offset;
    each topic's offsets are committed to its end."""
    from tests.support.kafka_admin import RecKafkaColumns

    a, b = kafka_admin.source("col-a"), kafka_admin.source("col-b")
    kafka_admin.publish(a, [b'{"id": %d}' % i for i in range(300)])
    kafka_admin.publish(b, [b'{"id": %d}' % i for i in range(300, 500)])
    rec = Recorder()
    spout = RecKafkaColumns(kafka_admin.url, [a, b], "two-topics", dead_letter_topic=f"{a}.dlq")
    spout.recorder = rec
    with LocalCluster(engine="local", capture=True) as cluster:
        cluster.submit_topology("col-two", scenario_conf("local", 1000), spout_into(spout, ColumnParse(0.0)))
        wait_until(lambda: rec.n_acked() >= 500, 60, lambda: f"acked {rec.n_acked()}/500, {rec.counters()}")
        emitted = cluster.coordinator("col-two").captured["src"]["default"]
        cluster.kill_topology("col-two")
    assert sorted(rec.acked) == list(range(500))
    rows = [r for vals in emitted.values() for r in vals]
    by_topic = Counter(r[0] for r in rows)
    assert by_topic == {a: 300, b: 200}, by_topic
    assert len({(r[0], r[1], r[2]) for r in rows}) == 500  # topic, partition, offset: one row each
    assert kafka_admin.left(a, "two-topics") == 0 and kafka_admin.left(b, "two-topics") == 0
