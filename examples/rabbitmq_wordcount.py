"""Word count over a RabbitMQ queue, with Storm's guarantee end to end.

    sentences (RabbitMQSpout) --shuffle--> split (SplitSentence) --fields["word"]--> count (WordCount)

Each sentence is a message on the queue (default "sentences"). It is acked at RabbitMQ only
when its whole tuple tree (the sentence and every word count) is processed; a failed tree is
retried (attempt count in the x-squall-attempts header) and after 3 retries the sentence goes to
the queue "sentences.dlq" with the reason. Stop the topology at any time: what it did not ack
goes back to the queue.

Run it (RabbitMQ on 127.0.0.1:5672, guest/guest; or set AMQP_URL / RABBITMQ_HOST, ...):

    python examples/rabbitmq_wordcount.py publish 10000       # put 10,000 sentences on the queue
    squall run examples/rabbitmq_wordcount.py --engine local --seconds 20
    squall run examples/rabbitmq_wordcount.py                 # on Spark

SQUALL_EXAMPLE_QUEUE names another queue.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wordcount import WORDS, SplitSentence, WordCount  # noqa: E402 - the word-count bolts

from squall import Config, StormTopology, TopologyBuilder  # noqa: E402
from squall.connectors.rabbitmq import RabbitMQSpout  # noqa: E402

QUEUE = os.environ.get("SQUALL_EXAMPLE_QUEUE", "sentences")


def build_topology(parallelism: int = 2) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("sentences", RabbitMQSpout(QUEUE, scheme="string", max_retries=3), parallelism=1)
    builder.set_bolt("split", SplitSentence(), parallelism=parallelism).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), parallelism=parallelism).fields_grouping("split", ["word"])
    return builder.create_topology()


CONF = Config()
CONF.set_max_spout_pending(2000)  # also the channel's prefetch
CONF.set_message_timeout_secs(30)


def publish(n: int) -> None:
    import pika

    from squall.connectors.rabbitmq import rabbitmq_url

    conn = pika.BlockingConnection(pika.URLParameters(rabbitmq_url().reveal()))
    ch = conn.channel()
    ch.queue_declare(QUEUE, durable=True)
    rng = random.Random(7)
    props = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent, content_type="text/plain")
    for _ in range(n):
        sentence = " ".join(rng.choices(WORDS, k=rng.randint(5, 12)))
        ch.basic_publish("", QUEUE, sentence.encode(), props)
    conn.close()
    print(f"published {n} sentences to queue {QUEUE!r}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "publish":
        publish(int(sys.argv[2]) if len(sys.argv) > 2 else 10000)
        sys.exit(0)
    from squall.cli import main

    sys.exit(main(["run", __file__] + sys.argv[1:]))
