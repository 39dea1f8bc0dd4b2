"""One small admin adapter per broker, so that each broker contract test is written once: the
test's own client makes a source (a queue, a stream), publishes to it, counts what is left at
the broker and reads the dead-letter target; and `broker_spout` makes the connector spout.

What "left" means per broker: RabbitMQ, messages ready in the queue and its retry queue (what
a consumer holds unacked is not visible without the management plugin: count it once no
consumer is connected, when RabbitMQ has requeued it); Redis, entries not yet delivered to the
group plus entries pending in it; JetStream, messages not yet delivered to the durable plus
those awaiting an ack (or a redelivery).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from squall.connectors.dead_letters import dead_letter_info
from squall.connectors.nats import JetStreamColumnSpout, JetStreamSpout
from squall.connectors.rabbitmq import RabbitMQColumnSpout, RabbitMQSpout
from squall.connectors.redis import RedisStreamColumnSpout, RedisStreamSpout
from tests.support.broker_services import (
    NATS_URL,
    RABBITMQ_URL,
    REDIS_URL,
    need_nats,
    need_rabbitmq,
    need_redis,
    unique,
    wait_until,
)
from tests.support.broker_topology import Recorder, Recording

BROKERS = ("rabbitmq", "redis", "nats")
GROUP = "squall-test"  # the Redis consumer group / JetStream durable of the tests' spouts
KILL_GROUP = "squall-kill"  # ... of the kill test's worker processes


class RecRabbit(Recording, RabbitMQSpout):
    pass


class RecRedis(Recording, RedisStreamSpout):
    pass


class RecNats(Recording, JetStreamSpout):
    pass


class RecRabbitColumns(Recording, RabbitMQColumnSpout):
    pass


class RecRedisColumns(Recording, RedisStreamColumnSpout):
    pass


class RecNatsColumns(Recording, JetStreamColumnSpout):
    pass


def broker_spout(broker: str, source: str, group: str = GROUP, url: str | None = None,
                 recorder: Recorder | None = None, columns: bool = False, **kw: Any) -> Any:
    """The connector spout of `broker` on `source` (group: Redis group or JetStream durable),
    reporting its final acks and dead letters to `recorder`; `columns`: its column spout."""
    if broker == "rabbitmq":
        spout = (RecRabbitColumns if columns else RecRabbit)(source, url or RABBITMQ_URL, **kw)
    elif broker == "redis":
        spout = (RecRedisColumns if columns else RecRedis)(source, group, url or REDIS_URL, **kw)
    elif broker == "nats":
        spout = (RecNatsColumns if columns else RecNats)(source, durable=group, url=url or NATS_URL, **kw)
    else:
        raise ValueError(f"unknown broker {broker!r}: one of {BROKERS}")
    spout.recorder = recorder
    return spout


class BrokerAdmin:
    """The test's own client of one broker. Subclasses implement the broker's side."""

    broker = "?"
    url = ""
    acks_confirmed = False  # acks lost with a dropped connection may bring messages back twice

    def spout(self, source: str, recorder: Recorder | None = None, **kw: Any) -> Any:
        return broker_spout(self.broker, source, recorder=recorder, **kw)

    @property
    def port(self) -> int:
        return urlsplit(self.url).port

    def settled(self, source: str, group: str = GROUP) -> bool:
        """Nothing left at the source: every message acked there (or dead-lettered)."""
        return self.left(source, group) == 0

    def publish_without_payload(self, source: str) -> str | None:
        """Publish a message that has no payload at all, if the broker can carry one; the decode
        error it must be dead-lettered with (None: the broker cannot)."""
        return None

    def unacked(self, source: str, group: str = GROUP) -> int | None:
        """Messages delivered to the group's consumers and not acked (None: the broker does not
        tell while a consumer is connected)."""
        return None

    def held_by_killed(self, source: str, group: str = KILL_GROUP) -> int:
        """Messages a consumer killed a moment ago held unacked, counted at the broker."""
        held = self.unacked(source, group)
        assert held is not None
        return held


class RabbitAdmin(BrokerAdmin):
    broker = "rabbitmq"

    def __init__(self) -> None:
        import pika

        self.pika = pika
        self.url = need_rabbitmq()
        self.conn = pika.BlockingConnection(pika.URLParameters(self.url))
        self.ch = self.conn.channel()
        self.fast = self.conn.channel()
        self.made: list[str] = []

    def source(self, prefix: str) -> str:
        name = unique(prefix)
        self.ch.queue_declare(name, durable=True)
        self.made += [name, f"{name}.retry", f"{name}.dlq"]
        return name

    def publish(self, source: str, payloads: list[bytes]) -> None:
        """Publish without waiting for a confirm per message (slow in pika), then wait until the
        queue holds them all (nothing consumes it yet)."""
        start = self.ready(source)
        props = self.pika.BasicProperties(delivery_mode=2)
        for body in payloads:
            self.fast.basic_publish("", source, body, props)
        wait_until(lambda: self.ready(source) >= start + len(payloads), 30, f"{len(payloads)} messages in {source}")

    def ready(self, source: str, group: str = GROUP) -> int:
        return self.ch.queue_declare(source, passive=True).method.message_count

    def left(self, source: str, group: str = GROUP) -> int:
        return self.ready(source) + self.ready(f"{source}.retry")

    def held_by_killed(self, source: str, group: str = KILL_GROUP) -> int:
        """Once the killed consumer's connection is gone, RabbitMQ has requeued what it held with
        the redelivered flag set: take every ready message (unacked), count those, give all back."""
        wait_until(lambda: self.ch.queue_declare(source, passive=True).method.consumer_count == 0, 30,
                   "RabbitMQ to notice the killed consumer")
        ch = self.conn.channel()
        redelivered = 0
        while True:
            method, _props, _body = ch.basic_get(source, auto_ack=False)
            if method is None:
                break
            redelivered += bool(method.redelivered)
        ch.close()  # every message taken goes back to the queue
        return redelivered

    def dead_letters(self, source: str) -> list[tuple[bytes | None, dict[str, str]]]:
        out = []
        while True:
            method, props, body = self.ch.basic_get(f"{source}.dlq", auto_ack=True)
            if method is None:
                return out
            out.append((body, dead_letter_info(props.headers or {})))

    def url_via(self, port: int) -> str:
        return f"amqp://guest:guest@127.0.0.1:{port}/%2F"

    def close(self) -> None:
        for q in self.made:
            try:
                self.ch.queue_delete(q)
            except Exception:  # noqa: BLE001 - it may not exist
                self.ch = self.conn.channel()
        self.conn.close()


class RedisAdmin(BrokerAdmin):
    broker = "redis"

    def __init__(self) -> None:
        import redis

        self.url = need_redis()
        self.r = redis.Redis.from_url(self.url)
        self.made: list[str] = []

    def source(self, prefix: str) -> str:
        name = unique(prefix)
        self.made.append(name)
        return name

    def publish(self, source: str, payloads: list[bytes | dict]) -> None:
        pipe = self.r.pipeline(transaction=False)
        for p in payloads:
            pipe.xadd(source, p if isinstance(p, dict) else {"payload": p})
        pipe.execute()

    def publish_without_payload(self, source: str) -> str | None:
        self.r.xadd(source, {"other": b"x"})
        return "entry has no field 'payload'"

    def ready(self, source: str, group: str = GROUP) -> int:
        for g in self.r.xinfo_groups(source):
            if g["name"].decode() == group:
                return int(g["lag"])
        return self.r.xlen(source)

    def unacked(self, source: str, group: str = GROUP) -> int | None:
        return int(self.r.xpending(source, group)["pending"])

    def left(self, source: str, group: str = GROUP) -> int:
        return self.ready(source, group) + self.unacked(source, group)

    def dead_letters(self, source: str) -> list[tuple[bytes | None, dict[str, str]]]:
        return [(fields.get(b"payload"), dead_letter_info(fields)) for _id, fields in self.r.xrange(f"{source}:dlq")]

    def url_via(self, port: int) -> str:
        return f"redis://127.0.0.1:{port}/0"

    def close(self) -> None:
        for key in self.made:
            self.r.delete(key, f"{key}:dlq")
        self.r.close()


class NatsAdmin(BrokerAdmin):
    """The test's own NATS connection, on its own event loop (each call runs to completion)."""

    broker = "nats"
    acks_confirmed = True  # the spout confirms its acks with a flush and sends lost ones again

    def __init__(self) -> None:
        import nats

        self.url = need_nats()
        self.loop = asyncio.new_event_loop()
        self.nc = self.run(nats.connect(self.url))
        self.js = self.nc.jetstream()
        self.made: list[str] = []

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def source(self, prefix: str) -> str:
        name = unique(prefix)
        self.run(self.js.add_stream(name=name, subjects=[name]))
        self.made += [name, f"{name}_DLQ"]
        return name

    def publish(self, source: str, payloads: list[bytes]) -> None:
        async def go() -> None:
            start = (await self.js.stream_info(source)).state.messages
            for p in payloads:
                await self.nc.publish(source, p)
            await self.nc.flush()
            for _ in range(600):
                if (await self.js.stream_info(source)).state.messages >= start + len(payloads):
                    return
                await asyncio.sleep(0.05)
            raise AssertionError(f"{len(payloads)} messages never reached stream {source}")

        self.run(go())

    def consumer(self, source: str, group: str = GROUP) -> Any:
        return self.run(self.js.consumer_info(source, group))

    def ready(self, source: str, group: str = GROUP) -> int:
        return self.consumer(source, group).num_pending

    def unacked(self, source: str, group: str = GROUP) -> int | None:
        return self.consumer(source, group).num_ack_pending

    def left(self, source: str, group: str = GROUP) -> int:
        info = self.consumer(source, group)
        return info.num_pending + info.num_ack_pending

    def dead_letters(self, source: str) -> list[tuple[bytes | None, dict[str, str]]]:
        async def go() -> list[tuple[bytes | None, dict[str, str]]]:
            dlq = f"{source}_DLQ"
            n = (await self.js.stream_info(dlq)).state.messages
            out = []
            for seq in range(1, n + 1):
                raw = await self.js.get_msg(dlq, seq)
                out.append((raw.data or b"", dead_letter_info(raw.headers or {})))
            return out

        return self.run(go())

    def url_via(self, port: int) -> str:
        return f"nats://127.0.0.1:{port}"

    def close(self) -> None:
        for name in self.made:
            try:
                self.run(self.js.delete_stream(name))
            except Exception:  # noqa: BLE001 - it may not exist
                pass
        self.run(self.nc.close())
        self.loop.close()


ADMINS: dict[str, type[BrokerAdmin]] = {"rabbitmq": RabbitAdmin, "redis": RedisAdmin, "nats": NatsAdmin}
