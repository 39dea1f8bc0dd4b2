"""A Structured Streaming word count through a `TridentSink` into PostgreSQL, run as a process of
its own so that a test can SIGKILL it (driver, JVM and Python workers) in the middle of a batch.

    python tests/support/trident_sink_job.py SRC CHECKPOINT TABLE MARKERS STOP_TXID PARTITION

With STOP_TXID >= 0, the state commit of that txid on state partition PARTITION writes
MARKERS/paused once its writes are in PostgreSQL (a partial commit: the other partition has not
committed, the coordinator has not recorded it) and blocks there, for the test to kill the job.
With STOP_TXID -1 the job runs the query until every file is in, then prints "DONE".
"""

from __future__ import annotations

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from squall.engine.spark.session import get_or_create_session  # noqa: E402
from squall.spark import SparkBatchSpout, TridentSink  # noqa: E402
from squall.trident import Count, PostgresMapState, TridentTopology  # noqa: E402
from tests.support.trident_helpers import CommitHooks, HookedStateFactory, Split  # noqa: E402

PAUSE_LIMIT_SECS = 600  # a paused job nobody killed (its test died) exits on its own


class PauseAfterCommit(CommitHooks):
    def after_commit(self, txid: int) -> None:
        if txid == self.options["stop_txid"] and self.partition == self.options["stop_partition"]:
            open(os.path.join(self.options["markers"], "paused"), "w").close()
            threading.Event().wait(PAUSE_LIMIT_SECS)
            os._exit(3)


def word_count(table: str, markers: str, stop_txid: int, partition: int) -> TridentTopology:
    factory = HookedStateFactory(PostgresMapState.factory(os.environ.get("SQUALL_PG_DSN"), "transactional",
                                                          table=table),
                                 PauseAfterCommit, stop_txid=stop_txid, stop_partition=partition, markers=markers)
    t = TridentTopology()
    (t.new_stream("rows", SparkBatchSpout(["sentence"])).each(["sentence"], Split(), ["word"])
             .group_by(["word"]).persistent_aggregate(factory, Count(), ["count"]).parallelism_hint(2))
    return t


def main(argv: list[str]) -> int:
    src, checkpoint, table, markers, stop_txid, partition = argv
    spark = get_or_create_session("local[2,4]", app_name="trident-sink-job")
    t = word_count(table, markers, int(stop_txid), int(partition))
    sink = TridentSink(t)
    df = spark.readStream.schema("sentence string").option("maxFilesPerTrigger", 1).json(src)
    query = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint).start()
    query.processAllAvailable()
    print("DONE", sink.last_batch, flush=True)
    query.stop()
    sink.close()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
