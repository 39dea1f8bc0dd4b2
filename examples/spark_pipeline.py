"""A Structured Streaming query whose records are enriched by a Storm topology into PostgreSQL,
one record at a time with Storm's guarantee: a record that makes the bolt raise is replayed, then
dead-lettered with its error, and the query runs on.

    .venv/bin/python examples/spark_pipeline.py [SOURCE_DIR]

Without SOURCE_DIR it writes three JSON files of orders (one of them poison: a negative
quantity) to a temp dir and reads those. The PostgreSQL DSN comes from $SQUALL_PG_DSN, else the
PG* variables (default: 127.0.0.1:5432, database "test", user "postgres").
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

from squall import Bolt, Config, TopologyBuilder
from squall.engine.spark.session import get_or_create_session
from squall.spark import TopologySink
from squall.trident.state.postgres import default_dsn

PRICES = {"apple": 0.5, "pear": 0.75, "plum": 0.25}


class Enrich(Bolt):
    """Prices an order; an order with a quantity below 1 is an error (the bolt raises)."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, declarer):
        declarer.declare(["order_id", "item", "quantity", "total"])

    def execute(self, t):
        if t["quantity"] < 1:
            raise ValueError(f"order {t['order_id']}: quantity {t['quantity']} is not positive")
        self.collector.emit([t["order_id"], t["item"], t["quantity"], PRICES[t["item"]] * t["quantity"]],
                            anchors=[t])
        self.collector.ack(t)


class WriteOrders(Bolt):
    """Upserts each priced order; acks it once PostgreSQL has committed it. The connection is
    opened on first use and left out of the pickled bolt (the engine snapshots bolts)."""

    def __init__(self, dsn, table):
        self.dsn, self.table = dsn, table
        self.conn = None

    def __getstate__(self):
        return {**self.__dict__, "conn": None}

    def prepare(self, conf, context, collector):
        self.collector = collector

    def declare_output_fields(self, declarer):
        pass

    def execute(self, t):
        if self.conn is None:
            import psycopg

            self.conn = psycopg.connect(self.dsn, autocommit=True)
        self.conn.execute(f"INSERT INTO {self.table} VALUES (%s, %s, %s, %s) ON CONFLICT (order_id) DO UPDATE "
                          "SET item = EXCLUDED.item, quantity = EXCLUDED.quantity, total = EXCLUDED.total",
                          t.values)
        self.collector.ack(t)

    def cleanup(self):
        if self.conn is not None:
            self.conn.close()


def write_orders(directory: str) -> None:
    """Three files of 100 orders; order 150 has quantity 0 (poison)."""
    items = sorted(PRICES)
    for f in range(3):
        with open(os.path.join(directory, f"orders-{f}.json"), "w", encoding="utf-8") as out:
            for i in range(f * 100, f * 100 + 100):
                out.write(json.dumps({"order_id": i, "item": items[i % 3], "quantity": 0 if i == 150 else 1 + i % 4})
                          + "\n")


def main(source: str | None = None, table: str = "orders_enriched") -> dict:
    import psycopg

    work = tempfile.mkdtemp(prefix="squall-pipeline-")
    if source is None:
        source = os.path.join(work, "orders")
        os.makedirs(source)
        write_orders(source)
    dsn = default_dsn()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} "
                     "(order_id bigint PRIMARY KEY, item text, quantity bigint, total double precision)")

    spark = get_or_create_session("local[2]", app_name="squall-pipeline")
    b = TopologyBuilder()
    b.set_bolt("enrich", Enrich(), parallelism=2).shuffle_grouping("rows")
    b.set_bolt("write", WriteOrders(dsn, table)).shuffle_grouping("enrich")
    letters = os.path.join(work, "dead-letters.jsonl")
    sink = TopologySink(b, conf={Config.SQUALL_DEAD_LETTER_PATH: letters, Config.SQUALL_MAX_REPLAYS: 2})

    orders = spark.readStream.schema("order_id long, item string, quantity long").json(source)
    query = (orders.writeStream.foreachBatch(sink)
             .option("checkpointLocation", os.path.join(work, "checkpoint")).start())
    query.processAllAvailable()  # a real pipeline runs on: query.awaitTermination()
    print(f"query active: {query.isActive}; last batch: {sink.last_batch}")
    query.stop()
    sink.close()
    with psycopg.connect(dsn) as conn:
        written = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    dead = [json.loads(line) for line in open(letters, encoding="utf-8")] if os.path.exists(letters) else []
    print(f"{written} orders in {table}; dead letters: {[(d['values']['order_id'], d['error']) for d in dead]}")
    return {"written": written, "dead": dead}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
