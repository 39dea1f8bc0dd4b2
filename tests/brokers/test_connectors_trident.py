"""Transactional Trident spouts over Redis Streams and JetStream: batch n is the same on
replay, counts exact after a failed batch; bad payloads skipped (and dead-lettered)."""

from __future__ import annotations

import asyncio
import json
import uuid

from squall import LocalCluster
from squall.connectors.trident_spouts import JetStreamTransactionalSpout, RedisStreamTransactionalSpout
from squall.trident import BaseFunction, Count, MemoryMapState, TridentTopology
from tests.support.broker_services import need_nats, need_redis
from tests.support.trident_helpers import FailFirstTime


class Word(BaseFunction):
    def execute(self, t, collector):
        collector.emit([t[0]["w"]])


def count_words(spout, tmp_path, trigger):
    t = TridentTopology()
    counts = (t.new_stream("broker", spout).each(["message"], Word(), ["word"])
              .each(["word"], FailFirstTime(str(tmp_path / "once"), trigger), ["w"])
              .group_by(["w"]).persistent_aggregate(MemoryMapState.factory("transactional"), Count(), ["c"]))
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology("t", {}, t.build())
        cluster.wait_idle(timeout_secs=120)
        errors = cluster.get_errors("t")
    return counts, errors


WORDS = ["a", "b", "c", "d"] * 25  # 100 messages: a b c d, 25 each


def test_redis_stream_transactional_spout(tmp_path):
    import redis

    url = need_redis()
    r = redis.Redis.from_url(url)
    stream = f"trident-{uuid.uuid4().hex[:8]}"
    try:
        for w in WORDS:
            r.xadd(stream, {"payload": json.dumps({"w": w})})
        r.xadd(stream, {"payload": b"\xff not json"})
        spout = RedisStreamTransactionalSpout(stream, url, scheme="json", batch_size=30,
                                              dead_letter_stream=stream + ":dlq")
        meta = spout.new_batch(1, None)
        assert spout.batch_rows(1, meta) == spout.batch_rows(1, meta)  # a replay is the same batch
        counts, errors = count_words(spout, tmp_path, "c")
        assert [e.error for e in errors] == ["RuntimeError: first attempt fails on 'c'"]
        assert counts.multi_get([["a"], ["b"], ["c"], ["d"]]) == [25, 25, 25, 25]
        (dl,) = r.xrange(stream + ":dlq")
        assert dl[1][b"squall-reason"] == b"decode"
    finally:
        r.delete(stream, stream + ":dlq")


def test_jetstream_transactional_spout(tmp_path):
    import nats

    url = need_nats()
    name = f"TRIDENT_{uuid.uuid4().hex[:8]}"
    subject = f"trident.{name}"

    async def setup():
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name=name, subjects=[subject])
        await js.add_stream(name=name + "_DLQ", subjects=[subject + ".dlq"])
        for w in WORDS:
            await js.publish(subject, json.dumps({"w": w}).encode())
        await js.publish(subject, b"\xff not json")
        await nc.close()

    async def teardown():
        nc = await nats.connect(url)
        js = nc.jetstream()
        info = await js.stream_info(name + "_DLQ")
        await js.delete_stream(name)
        await js.delete_stream(name + "_DLQ")
        await nc.close()
        return info.state.messages

    asyncio.run(setup())
    spout = JetStreamTransactionalSpout(name, url, subject=subject, scheme="json", batch_size=30,
                                        dead_letter_subject=subject + ".dlq")
    try:
        meta = spout.new_batch(1, None)
        assert meta == [1, 30]
        assert spout.batch_rows(1, meta) == spout.batch_rows(1, meta)
        counts, errors = count_words(spout, tmp_path, "b")
        assert [e.error for e in errors] == ["RuntimeError: first attempt fails on 'b'"]
        assert counts.multi_get([["a"], ["b"], ["c"], ["d"]]) == [25, 25, 25, 25]
    finally:
        spout.close()
        dead = asyncio.run(teardown())
    assert dead >= 1  # the bad payload, dead-lettered with its reason (once per read of its batch)
