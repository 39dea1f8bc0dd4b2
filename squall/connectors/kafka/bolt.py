"""KafkaBolt: writes each input to a Kafka topic and acks the input only once the broker
confirmed the write (its delivery report); a delivery error fails the input, so the spout
replays it. As storm-kafka-client's KafkaBolt, at least once.

Records are produced without waiting; the delivery reports are collected on every execute and,
at the end of each wave (`finish_wave`), all of them are awaited up to `delivery_timeout_secs`:
an input whose report has not come by then is failed (a late success then only duplicates).
Keys and values: bytes as they are, str as UTF-8, None as None, anything else as JSON.
"""

from __future__ import annotations

import logging
from typing import Any

from squall.api.components import Bolt
from squall.connectors.kafka.common import kafka_bootstrap, kafka_error_text, to_bytes

log = logging.getLogger("squall.connectors.kafka")


class KafkaBolt(Bolt):
    """Produce `value_field` (keyed by `key_field`, None: no key) of each input to `topic`."""

    def __init__(self, bootstrap_servers: str | list[str] | None = None, topic: str = "",
                 key_field: str | None = "key", value_field: str = "value", producer_config: dict | None = None,
                 delivery_timeout_secs: float = 30.0):
        if not topic:
            raise ValueError("KafkaBolt needs a topic: KafkaBolt(servers, 'counts')")
        self.bootstrap_servers = kafka_bootstrap(bootstrap_servers)
        self.topic = topic
        self.key_field = key_field
        self.value_field = value_field
        self.producer_config = dict(producer_config or {})
        self.delivery_timeout_secs = float(delivery_timeout_secs)
        self._producer: Any = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_producer": None, "_pending": {}}

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.component_id = getattr(context, "this_component_id", "kafka-bolt")
        self._pending: dict[int, Any] = {}  # id(tuple) -> tuple, awaiting its delivery report
        self._producer = None
        self._ensure()

    def _ensure(self) -> Any:
        """The producer, made on first use in this process (a copy carried between waves has none)."""
        if self._producer is None:
            from confluent_kafka import Producer  # noqa: PLC0415

            self._producer = Producer({"bootstrap.servers": self.bootstrap_servers, "logger": log,
                                       "enable.idempotence": True, "linger.ms": 5,
                                       "client.id": f"squall-{self.component_id}", **self.producer_config})
        return self._producer

    def declare_output_fields(self, declarer: Any) -> None:
        pass

    def execute(self, t: Any) -> None:  # noqa: A002 - Storm's parameter name
        key = to_bytes(t[self.key_field]) if self.key_field else None
        value = to_bytes(t[self.value_field])
        producer = self._ensure()
        self._pending[id(t)] = t
        try:
            producer.produce(self.topic, value=value, key=key, on_delivery=self._report_for(t))
        except BufferError:  # the local queue is full: wait for room, then try once more
            producer.flush(self.delivery_timeout_secs)
            producer.produce(self.topic, value=value, key=key, on_delivery=self._report_for(t))
        producer.poll(0)

    def _report_for(self, t: Any) -> Any:
        def delivered(err: Any, _msg: Any) -> None:
            if self._pending.pop(id(t), None) is None:
                return  # failed already, at a wave's end
            if err is None:
                self.collector.ack(t)
            else:
                self.collector.report_error(f"{self.component_id}: writing to Kafka topic {self.topic!r} at "
                                            f"{self.bootstrap_servers} failed: {kafka_error_text(err)}")
                self.collector.fail(t)

        return delivered

    def finish_wave(self) -> None:
        if self._producer is None or not self._pending:
            return
        self._producer.flush(self.delivery_timeout_secs)
        late, self._pending = list(self._pending.values()), {}
        if late:
            self.collector.report_error(f"{self.component_id}: {len(late)} write(s) to Kafka topic {self.topic!r} "
                                        f"unconfirmed after {self.delivery_timeout_secs:g}s; failed")
        for t in late:
            self.collector.fail(t)

    def cleanup(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.delivery_timeout_secs)
