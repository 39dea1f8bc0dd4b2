"""The worker process of the broker kill tests, and how a test starts it and reads what it did.

Run as a script it is that worker:

    python tests/support/broker_kill_worker.py {rabbitmq|redis|nats|kafka|kafka-columns} NAME OUTFILE
                                              [--delay-ms N] [--url URL] [--die-after-dead-letter]

It consumes NAME (a queue; a stream with group "squall-kill"; a stream with durable
"squall-kill") on the local engine and appends each processed message id to OUTFILE, one line
each, flushed per line, until SIGTERM (then it closes its topology: the last acks go out).
"kafka-columns" reads with KafkaColumnSpout and parses with a columnar bolt (the sink stays a
tuple bolt).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

if __name__ == "__main__":  # as a script: import squall and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from squall import Config, LocalCluster, TopologyBuilder
from tests.support.broker_admins import BROKERS, KILL_GROUP, broker_spout
from tests.support.broker_services import ROOT
from tests.support.broker_topology import FileSink, FlakyParse

KILL_TIMEOUT_SECS = 3
MAX_PENDING = 100


def start_worker(broker: str, name: str, out: Path, delay_ms: float = 1.0, url: str | None = None,
                 die_after_dead_letter: bool = False) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    url_args = (["--url", url] if url else []) + (["--die-after-dead-letter"] if die_after_dead_letter else [])
    with open(f"{out}.stderr", "ab") as err:  # the worker's stderr, for the test's failure message
        return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), broker, name, str(out),
                                 "--delay-ms", str(delay_ms), *url_args], env=env, cwd=str(ROOT),
                                stdout=subprocess.DEVNULL, stderr=err)


def read_ids(path: Path) -> Counter:
    if not path.exists():
        return Counter()
    with open(path) as f:
        return Counter(int(line) for line in f if line.strip())


DIED_AFTER_DEAD_LETTER = 137  # the exit code of a worker that died between a dead letter and the source's ack


def die_after_dead_letter(broker: str) -> None:
    """Make this process die (os._exit, as a SIGKILL would leave it) right after a spout's dead
    letter is confirmed by the broker and before the message is acked at its source: the two steps
    a crash could separate (on Redis they are one transaction: it dies after it)."""

    def die() -> None:
        os._exit(DIED_AFTER_DEAD_LETTER)

    if broker == "rabbitmq":
        from squall.connectors.rabbitmq import RabbitMQSpout

        republish = RabbitMQSpout._republish

        def _republish(self, m, routing_key, headers):
            if routing_key == self.dead_letter_queue:
                publish = self._pub.basic_publish
                self._pub.basic_publish = lambda *a, **k: (publish(*a, **k), die())
            return republish(self, m, routing_key, headers)

        RabbitMQSpout._republish = _republish
    elif broker == "redis":
        from squall.connectors.redis.streams import RedisStreamSpout

        send = RedisStreamSpout._send_dead_letter
        RedisStreamSpout._send_dead_letter = lambda self, m, failure: (send(self, m, failure), die())
    elif broker == "nats":
        from squall.connectors.nats.jetstream import JetStreamSpout

        publish_dead_letter = JetStreamSpout._publish_dead_letter

        async def _publish_dead_letter(self, *a, **k):
            await publish_dead_letter(self, *a, **k)
            die()

        JetStreamSpout._publish_dead_letter = _publish_dead_letter
    else:  # kafka: the dead letter delivered, its offset not yet marked done (so not committed)
        from squall.connectors.kafka.spout import KafkaSpout

        KafkaSpout._dead_done = lambda self, m, failure: die()


def worker_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="broker_kill_worker.py")
    p.add_argument("broker", choices=(*BROKERS, "kafka", "kafka-columns"))
    p.add_argument("name")
    p.add_argument("out")
    p.add_argument("--delay-ms", type=float, default=1.0)
    p.add_argument("--url", default=None, help="the broker's URL (Kafka: its bootstrap servers)")
    p.add_argument("--die-after-dead-letter", action="store_true",
                   help="exit right after the first dead letter is confirmed, before the source's ack")
    args = p.parse_args(argv)
    if args.die_after_dead_letter:
        die_after_dead_letter(args.broker.split("-")[0])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    parse = FlakyParse(0.0)
    if args.broker.startswith("kafka"):
        from tests.support.kafka_admin import kafka_spout

        columns = args.broker == "kafka-columns"
        spout = kafka_spout(args.url, args.name, KILL_GROUP, scheme="string" if columns else "json",
                            retry_delay_secs=0.2, columns=columns)
        if columns:
            from tests.support.column_topology import ColumnParse

            parse = ColumnParse(0.0)
    else:
        spout = broker_spout(args.broker, args.name, KILL_GROUP, url=args.url, scheme="json", retry_delay_secs=0.2)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("parse", parse).shuffle_grouping("src")
    b.set_bolt("sink", FileSink(args.out, args.delay_ms)).shuffle_grouping("parse")
    conf = Config()
    conf.set_message_timeout_secs(KILL_TIMEOUT_SECS)
    conf.set_max_spout_pending(MAX_PENDING)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("kill-test", conf, b.create_topology())
        while not stop.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
