"""Trident from Kafka: batches are offset ranges per partition stored with the txid; a replay
is the same batch, so counts into SQLite are exact after a failed batch and after kills of the
topology's process, on both engines and with both Kafka Trident spouts."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from squall import LocalCluster
from squall.connectors.kafka import OpaqueKafkaSpout, TransactionalKafkaSpout
from squall.trident import BaseFunction, Count, SQLiteMapState, TridentTopology
from tests.support.trident_helpers import FailFirstTime, write_corpus

SPOUTS = {"transactional": TransactionalKafkaSpout, "opaque": OpaqueKafkaSpout}


class SplitSentence(BaseFunction):
    def execute(self, t, collector):
        for w in t[0]["sentence"].split():
            collector.emit([w])


def produce_corpus(kafka_admin, topic: str, tmp_path, files: int, lines: int) -> Counter:
    truth = write_corpus(str(tmp_path / "corpus"), files=files, lines=lines, seed=5)
    values = [line.encode() for f in sorted((tmp_path / "corpus").iterdir()) for line in f.read_text().splitlines()]
    kafka_admin.client.produce(topic, values + [b"\xff not json"])
    return truth


@pytest.mark.parametrize("kind", sorted(SPOUTS))
def test_trident_word_count_from_kafka_into_sqlite_is_exact(kafka_admin, cluster_kwargs, tmp_path, kind):
    """3 partitions, 1,500 sentences, one bad payload, and the first batch holding "fig"
    failing once: the counts in SQLite equal the truth; the bad payload is dead-lettered."""
    topic = kafka_admin.source(f"trident-{kind}")
    truth = produce_corpus(kafka_admin, topic, tmp_path, files=3, lines=500)
    spout = SPOUTS[kind](kafka_admin.url, topic, scheme="json", batch_size=200, dead_letter_topic=f"{topic}.dlq")
    t = TridentTopology()
    counts = (t.new_stream("kafka", spout).each(["value"], SplitSentence(), ["word"])
              .each(["word"], FailFirstTime(str(tmp_path / "once"), "fig"), ["w"])
              .group_by(["w"]).persistent_aggregate(SQLiteMapState.factory(str(tmp_path / "counts.db"), kind),
                                                    Count(), ["count"]))
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("kt", {}, t.build())
        cluster.wait_idle(timeout_secs=180)
        errors = cluster.get_errors("kt")
        cluster.kill_topology("kt")
    words = sorted(truth)
    assert dict(zip(words, counts.multi_get([[w] for w in words]))) == dict(truth)
    assert any("first attempt fails on 'fig'" in e.error for e in errors), errors
    dead = kafka_admin.client.read(f"{topic}.dlq")
    assert dead and {m.value() for m in dead} == {b"\xff not json"}
    assert dict(dead[0].headers())["squall-reason"] == b"decode"


def test_a_batch_reread_is_the_same_batch(kafka_admin):
    topic = kafka_admin.source("trident-replay")
    kafka_admin.client.produce(topic, [json.dumps({"n": i}).encode() for i in range(100)])
    spout = TransactionalKafkaSpout(kafka_admin.url, topic, scheme="json", batch_size=40)
    try:
        meta1 = spout.new_batch(1, None)
        first = spout.batch_rows(1, meta1)
        assert len(first) == 40 and sum(e - s for s, e in meta1.values()) == 40
        # KafkaSpout's positional arguments; a new reader, without the batch cached
        fresh = TransactionalKafkaSpout(kafka_admin.url, [topic], "replayer", "json", batch_size=40)
        assert sorted(fresh.batch_rows(1, meta1)) == sorted(first)
        meta2 = spout.new_batch(2, meta1)
        assert all(meta2[p][0] == meta1[p][1] for p in meta1)  # batch 2 starts where batch 1 ended
        rest = spout.batch_rows(2, meta2)
        # asked again from batch 1's end after the reader went on (an opaque retry), and asked of the
        # reader that replayed batch 1: each starts at batch 1's end and holds its ranges' records
        for reader in (spout, fresh):
            again = reader.new_batch(2, meta1)
            assert all(again[p][0] == meta1[p][1] for p in meta1) and 0 < sum(e - s for s, e in again.values()) <= 40
            check = TransactionalKafkaSpout(kafka_admin.url, [topic], "checker", "json", batch_size=40)
            assert sorted(check.batch_rows(2, again)) == sorted(reader.batch_rows(2, again))
            check.close()
        rows = first + rest
        while (meta := spout.new_batch(3, meta2)) is not None:
            rows += spout.batch_rows(3, meta)
            meta2 = meta
        assert sorted(r[4]["n"] for r in rows) == list(range(100))
        fresh.close()
    finally:
        spout.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(SPOUTS))
def test_counts_exact_after_kills(kafka_admin, tmp_path, monkeypatch, kind):
    """tests/trident/test_trident_kill.py's scenario fed from Kafka: the word count is SIGKILLed
    10 times at chosen points of its state commits and restarted; every kill is followed by a
    replay of the interrupted batch (re-read from its stored offset ranges) and the counts in
    SQLite are exact at the end."""
    from tests.support.trident_kill_job import factory
    from tests.trident.test_trident_kill import check_kills_and_replays, run_with_kills

    topic = kafka_admin.source(f"trident-kill-{kind}")
    truth = write_corpus(str(tmp_path / "corpus"), files=40, lines=200, seed=11)
    values = [line.encode() for f in sorted((tmp_path / "corpus").iterdir()) for line in f.read_text().splitlines()]
    kafka_admin.client.produce(topic, values)
    monkeypatch.setenv("SQUALL_KAFKA_BOOTSTRAP", kafka_admin.url)
    target = str(tmp_path / "state.db")
    report = run_with_kills([topic, "sqlite", target, kind, f"kafka-{kind}"], f"kafka/{kind}", tmp_path)
    check_kills_and_replays(report)
    state = factory("sqlite", target, kind).make_state({}, 0, 1)
    words = sorted(truth)
    got = dict(zip(words, state.multi_get([[w] for w in words])))
    state.close()
    assert got == dict(truth)
