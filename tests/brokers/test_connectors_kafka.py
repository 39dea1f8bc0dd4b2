"""Kafka beyond the shared broker contract (test_broker_contract.py runs KafkaSpout through it):
KafkaBolt's delivery acks, a SIGKILL that duplicates only uncommitted offsets, and two
consumers of one group where one is killed. Against a Tansu broker started for the session, or
the Kafka at SQUALL_KAFKA_BOOTSTRAP."""

from __future__ import annotations

import os
import signal

import pytest

from squall import Config, LocalCluster, TopologyBuilder
from squall.connectors.kafka import KafkaBolt
from tests.support.broker_kill_worker import KILL_GROUP, read_ids, start_worker
from tests.support.broker_services import unique, wait_until
from tests.support.broker_topology import FlakyParse, Hold, Recorder, spout_into
from tests.support.column_topology import ColumnParse
from tests.support.kafka_admin import kafka_spout


def _bolt_topology(spout, bolt):
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("out", bolt, parallelism=2).shuffle_grouping("src")
    return b.create_topology()


def test_kafka_bolt_acks_its_input_once_the_broker_has_the_record(kafka_admin, cluster_kwargs):
    """topic A -> KafkaSpout -> KafkaBolt -> topic B: B gets every record with its key, and A's
    offsets are committed to its log end: each input was acked after its write was confirmed."""
    n = 500
    src, dst = kafka_admin.source("bolt-in"), kafka_admin.source("bolt-out")
    kafka_admin.client.produce(src, [b"v%d" % i for i in range(n)], keys=[b"k%d" % i for i in range(n)])
    rec = Recorder()
    spout = kafka_spout(kafka_admin.url, src, recorder=rec)
    bolt = KafkaBolt(kafka_admin.url, dst, key_field="key", value_field="value")
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("bolt", Config(), _bolt_topology(spout, bolt))
        wait_until(lambda: rec.n_acked() >= n, 60, lambda: f"acked {rec.n_acked()}/{n}, {rec.counters()}")
        cluster.kill_topology("bolt")
    got = {m.value().decode(): m.key().decode() for m in kafka_admin.client.read(dst, 3, expect=n)}
    assert got == {f"v{i}": f"k{i}" for i in range(n)}
    assert kafka_admin.left(src) == 0


def test_kafka_bolt_fails_its_input_on_a_delivery_error(kafka_admin):
    """A write the broker refuses fails the input: the spout retries it, then dead-letters it
    with the delivery error."""
    src = kafka_admin.source("bolt-err")
    kafka_admin.client.produce(src, [b"y" * 5000], 1)  # larger than the bolt's producer may send
    rec = Recorder()
    spout = kafka_spout(kafka_admin.url, src, recorder=rec, max_retries=1, retry_delay_secs=0.05)
    big = KafkaBolt(kafka_admin.url, f"{src}.dlq", key_field=None, value_field="value",
                    producer_config={"message.max.bytes": 1000, "message.timeout.ms": 2000})
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("bolt-err", Config(), _bolt_topology(spout, big))
        wait_until(lambda: rec.dead, 30, lambda: f"{rec.counters()}")
        errors = cluster.get_errors("bolt-err")
        cluster.kill_topology("bolt-err")
    [(_key, _m, failure)] = rec.dead
    assert failure.attempts == 2
    assert any("writing to Kafka topic" in e.error or "MSG_SIZE_TOO_LARGE" in e.error for e in errors), errors
    assert kafka_admin.left(src) == 0


SPOUTS = ["kafka", "kafka-columns"]  # KafkaSpout, and KafkaColumnSpout into a columnar parse bolt


@pytest.mark.slow
@pytest.mark.parametrize("kind", SPOUTS)
def test_sigkill_duplicates_only_uncommitted_offsets(kafka_admin, tmp_path, kind):
    """SIGKILL the topology's process mid-stream, restart it: nothing is lost, and every record
    processed twice lies at or past the offset its partition had committed at the kill."""
    n = 3000
    source = kafka_admin.source("kill-dups")
    kafka_admin.publish(source, [b'{"id": %d}' % i for i in range(n)])
    out = tmp_path / "out.txt"
    worker = start_worker(kind, source, out, delay_ms=1, url=kafka_admin.url)
    try:
        wait_until(lambda: sum(read_ids(out).values()) >= n // 4, 60, lambda: f"{sum(read_ids(out).values())} lines")
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
        before = read_ids(out)
        assert len(before) < n, "finished before the kill: the test proves nothing"
        committed = kafka_admin.client.committed(source, KILL_GROUP)
        worker = start_worker(kind, source, out, delay_ms=1, url=kafka_admin.url)
        wait_until(lambda: set(read_ids(out)) >= set(range(n)), 90,
                   lambda: f"{n - len(set(read_ids(out)))} ids missing; stderr: "
                           f"{(tmp_path / 'out.txt.stderr').read_text()[-2000:]}")
    finally:
        if worker.poll() is None:
            worker.terminate()
            worker.wait(30)
    seen = read_ids(out)
    assert set(seen) == set(range(n))
    twice = [i for i, c in seen.items() if c > 1]
    where = {i: kafka_admin.client.where[(source, b'{"id": %d}' % i)] for i in twice}
    bad = {i: w for i, w in where.items() if w[1] < committed[w[0]]}
    assert not bad, f"processed twice although committed before the kill (partition, offset): {bad}"
    wait_until(lambda: kafka_admin.settled(source, KILL_GROUP), 30, lambda: f"{kafka_admin.left(source, KILL_GROUP)}")


@pytest.mark.slow
@pytest.mark.parametrize("kind", SPOUTS)
def test_two_consumers_of_one_group_one_killed(kafka_admin, tmp_path, kind):
    """Two topology processes share the group's 3 partitions; SIGKILL one mid-stream: the other
    takes its partitions over and every record is processed."""
    n = 3000
    source = kafka_admin.source("two")
    kafka_admin.publish(source, [b'{"id": %d}' % i for i in range(n)])
    out_a, out_b = tmp_path / "a.txt", tmp_path / "b.txt"
    a = start_worker(kind, source, out_a, delay_ms=2, url=kafka_admin.url)
    b = start_worker(kind, source, out_b, delay_ms=2, url=kafka_admin.url)
    try:
        wait_until(lambda: read_ids(out_a) and read_ids(out_b), 60, "both consumers processing")
        os.kill(a.pid, signal.SIGKILL)
        a.wait(10)
        assert len(set(read_ids(out_a)) | set(read_ids(out_b))) < n, "finished before the kill"
        wait_until(lambda: set(read_ids(out_a)) | set(read_ids(out_b)) >= set(range(n)), 120,
                   lambda: f"{n - len(set(read_ids(out_a)) | set(read_ids(out_b)))} ids missing")
        assert b.poll() is None
    finally:
        for w in (a, b):
            if w.poll() is None:
                w.terminate()
                w.wait(30)
    assert set(read_ids(out_a)) | set(read_ids(out_b)) == set(range(n))
    wait_until(lambda: kafka_admin.settled(source, KILL_GROUP), 30, lambda: f"{kafka_admin.left(source, KILL_GROUP)}")


def _run_until(spout, rec, n_acked: int, conf=None):
    """Run `spout` -> FlakyParse until `n_acked` ids are acked (0: until a dead letter)."""
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("t", conf or Config(), spout_into(spout, FlakyParse(0.0)))
        wait_until(lambda: rec.n_acked() >= n_acked and (n_acked or rec.dead), 60, lambda: f"{rec.counters()}")
        cluster.kill_topology("t")


def test_the_spout_reads_one_max_spout_pending_ahead_of_what_it_emits(kafka_admin):
    """max.spout.pending 5 and a bolt that holds every tuple: the spout emits 5, and polls and
    decodes 5 more, ready to emit as soon as acks free room; it takes no more than that."""
    topic = kafka_admin.source("ahead")
    kafka_admin.publish(topic, [b'{"id": %d}' % i for i in range(30)])
    rec = Recorder()
    conf = Config()
    conf.set_max_spout_pending(5)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("ahead", conf, spout_into(kafka_spout(kafka_admin.url, topic, "ahead", recorder=rec,
                                                                      scheme="json"), Hold()))
        wait_until(lambda: rec.spouts and rec.spouts[0]._offsets.outstanding() >= 10, 30,  # noqa: SLF001
                   lambda: f"{rec.counters()}")
        cluster.wait_idle(10)
        spout = rec.spouts[0]
        assert (spout.counters.emitted, spout._offsets.outstanding(), len(spout._incoming)) == (5, 10, 5)  # noqa: SLF001
        cluster.kill_topology("ahead")


def test_first_poll_offset_earliest_ignores_commits_once_uncommitted_resumes(kafka_admin):
    """After a group committed everything, "earliest" (Storm's UNCOMMITTED_EARLIEST) reads
    nothing more, while "EARLIEST" starts again at the beginning."""
    topic = kafka_admin.source("first-poll")
    kafka_admin.publish(topic, [b'{"id": %d}' % i for i in range(30)])
    rec = Recorder()
    _run_until(kafka_spout(kafka_admin.url, topic, "fp", recorder=rec, scheme="json"), rec, 30)
    assert kafka_admin.left(topic, "fp") == 0
    kafka_admin.publish(topic, [b'{"id": %d}' % i for i in range(30, 33)])
    again = Recorder()
    _run_until(kafka_spout(kafka_admin.url, topic, "fp", recorder=again, scheme="json"), again, 3)
    assert sorted(again.acked) == [30, 31, 32]  # resumed at the committed offsets
    anew = Recorder()
    _run_until(kafka_spout(kafka_admin.url, topic, "fp", recorder=anew, scheme="json", first_poll_offset="EARLIEST"),
               anew, 33)
    assert sorted(anew.acked) == list(range(33))


def test_without_a_dead_letter_topic_the_sink_gets_the_record(kafka_admin, tmp_path):
    """dead_letter_topic=None: a record that keeps failing goes to the topology's dead-letter
    file with its reason and its bytes, and its offset is committed."""
    import base64
    import json

    topic = kafka_admin.source("dl-sink")
    kafka_admin.publish(topic, [b'{"id": "poison", "poison": true}'])
    rec = Recorder()
    spout = kafka_spout(kafka_admin.url, topic, "dls", recorder=rec, scheme="json", dead_letter_topic=None,
                        max_retries=1, retry_delay_secs=0.05)
    conf = Config()
    conf["squall.dead.letter.path"] = str(tmp_path / "dead.jsonl")
    _run_until(spout, rec, 0, conf)
    [line] = (tmp_path / "dead.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["squall-reason"] == "error" and record["squall-attempts"] == "2"
    assert "poison message" in record["squall-error"]
    assert base64.b64decode(record["value_base64"]) == b'{"id": "poison", "poison": true}'
    assert (record["topic"], record["partition"]) == (topic, 0)
    assert kafka_admin.left(topic, "dls") == 0


def _manual(kafka_admin, topic: str, rec: Recorder, tasks: int, columns: bool = False, **kw):
    """`tasks` recording KafkaSpout (`columns`: KafkaColumnSpout) tasks with assignment="manual"
    -> a parse bolt."""
    b = TopologyBuilder()
    b.set_spout("src", kafka_spout(kafka_admin.url, topic, topic, recorder=rec, assignment="manual", columns=columns,
                                   scheme="string" if columns else "json", **kw), parallelism=tasks)
    b.set_bolt("parse", ColumnParse() if columns else FlakyParse(0.0), parallelism=2).shuffle_grouping("src")
    return b.create_topology()


@pytest.mark.parametrize("kind", SPOUTS)
def test_manual_assignment_deals_the_partitions_out_over_the_tasks(kafka_admin, cluster_kwargs, kind):
    """assignment="manual" (Storm's default): two tasks over a 3-partition topic take partitions
    [0, 2] and [1] by task index, with no group and no rebalance; every record is acked once, and
    the offsets are committed under the group all the same."""
    n = 600
    topic = kafka_admin.source("manual")
    kafka_admin.publish(topic, [b'{"id": %d}' % i for i in range(n)])
    rec = Recorder()
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("manual", Config(), _manual(kafka_admin, topic, rec, 2,
                                                            columns=kind == "kafka-columns"))
        wait_until(lambda: rec.n_acked() >= n, 60, lambda: f"acked {rec.n_acked()}/{n}, {rec.counters()}")
        owned = {s.task_index: sorted(p for _t, p in s._gens) for s in rec.spouts}  # noqa: SLF001
        revoked = rec.total("revoked")
        cluster.kill_topology("manual")
    assert owned == {0: [0, 2], 1: [1]}
    assert revoked == 0
    assert sorted(rec.acked) == list(range(n)) and set(rec.acked.values()) == {1}
    assert kafka_admin.left(topic, topic) == 0


def test_manual_assignment_takes_up_a_topic_that_appears_later(kafka_admin):
    """A manual spout of a topic that does not exist yet reads nothing; once the topic is made,
    the next partition refresh takes up its partitions and every record is acked."""
    from confluent_kafka.admin import NewTopic

    topic = unique("later")
    rec = Recorder()
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("later", Config(), _manual(kafka_admin, topic, rec, 1, partition_refresh_secs=0.2))
        wait_until(lambda: rec.spouts, 30, "the spout opened")
        assert rec.total("assigned") == 0
        kafka_admin.client.made.append(topic)
        kafka_admin.client.admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
        kafka_admin.publish(topic, [b'{"id": %d}' % i for i in range(90)])
        wait_until(lambda: rec.n_acked() >= 90, 60, lambda: f"acked {rec.n_acked()}/90, {rec.counters()}")
        assigned = rec.total("assigned")
        cluster.kill_topology("later")
    assert assigned == 3
    assert sorted(rec.acked) == list(range(90))


def test_an_unknown_assignment_says_which_there_are(kafka_admin):
    with pytest.raises(ValueError, match="'group', 'manual'"):
        kafka_spout(kafka_admin.url, "t", assignment="round-robin")
