"""The broker contract's admin adapter for Kafka (see broker_admins.py): a source is a topic of
3 partitions with a `<topic>.dlq` dead-letter topic; "left" is what lies past the group's
committed offsets (Kafka keeps every record: what is done is what is committed)."""

from __future__ import annotations

from typing import Any

from squall.connectors.dead_letters import dead_letter_info
from squall.connectors.kafka import KafkaColumnSpout, KafkaSpout
from tests.support.broker_admins import GROUP, KILL_GROUP, BrokerAdmin
from tests.support.broker_topology import Recorder, Recording
from tests.support.kafka_broker import KafkaBroker, KafkaClient

PARTITIONS = 3


class RecKafka(Recording, KafkaSpout):
    pass


class RecKafkaColumns(Recording, KafkaColumnSpout):
    pass


def kafka_spout(bootstrap: str, topic: str, group: str = GROUP, recorder: Recorder | None = None,
                columns: bool = False, **kw: Any) -> RecKafka | RecKafkaColumns:
    """A recording KafkaSpout (KafkaColumnSpout with `columns`) of `topic`, dead letters to `<topic>.dlq`."""
    kw.setdefault("dead_letter_topic", f"{topic}.dlq")
    spout = (RecKafkaColumns if columns else RecKafka)(bootstrap, [topic], group, **kw)
    spout.recorder = recorder
    return spout


class KafkaAdmin(BrokerAdmin):
    broker = "kafka"

    def __init__(self, broker: KafkaBroker):
        self.url = broker.bootstrap
        self.client = KafkaClient(broker.bootstrap)

    @property
    def worker_url(self) -> str:
        return self.url

    def spout(self, source: str, recorder: Recorder | None = None, **kw: Any) -> Any:
        url = kw.pop("url", None) or self.url
        return kafka_spout(url, source, recorder=recorder, **kw)

    def source(self, prefix: str) -> str:
        return self.client.topic(prefix, PARTITIONS)

    def publish(self, source: str, payloads: list[bytes]) -> None:
        self.client.produce(source, payloads, PARTITIONS)

    def publish_without_payload(self, source: str) -> str | None:
        self.client.produce(source, [None], 1)  # a tombstone: a record without a value
        return "record has no value"

    def ready(self, source: str, group: str = GROUP) -> int | None:
        return None  # Kafka does not know what a consumer fetched and has not committed

    def left(self, source: str, group: str = GROUP) -> int:
        return self.client.lag(source, group, PARTITIONS)

    def held_by_killed(self, source: str, group: str = KILL_GROUP) -> int:
        return self.left(source, group)

    def dead_letters(self, source: str) -> list[tuple[bytes | None, dict[str, str]]]:
        return [(m.value(), dead_letter_info(dict(m.headers() or []))) for m in self.client.read(f"{source}.dlq")]

    def close(self) -> None:
        self.client.delete_made()
