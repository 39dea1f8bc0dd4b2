"""A Trident word count as the foreachBatch sink of a real Structured Streaming query, into
PostgreSQL (transactional state, txid = batch id): the counts are exact when the query is stopped
in the middle of a batch and restarted from its checkpoint, and when its driver process is
SIGKILLed in the middle of a batch's commit and a new process restarts from the checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from squall.spark import SparkBatchSpout, TridentSink
from squall.trident import BaseFunction, Count, MemoryMapState, PostgresMapState, TridentTopology
from tests.support.broker_services import need_postgres
from tests.support.trident_helpers import Split, write_corpus

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "support" / "trident_sink_job.py"
HANG_GUARD_SECS = 300  # a step that never comes fails the test instead of hanging it


def stored_counts(table: str, words: list[str]) -> dict:
    state = PostgresMapState.factory(None, "transactional", table=table).make_state({}, 0, 1)
    try:
        return dict(zip(words, state.multi_get([[w] for w in words]), strict=True))
    finally:
        state.close()


def wait_for(path: Path, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + HANG_GUARD_SECS
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the job exited ({proc.returncode}) before {what}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {HANG_GUARD_SECS} s", pytrace=False)
        time.sleep(0.05)


class SplitPausing(BaseFunction):
    """Splits the sentence; on the word PAUSE it says so (a marker file) and waits for a release file."""

    def __init__(self, markers: str):
        self.markers = markers

    def execute(self, t, collector):
        words = t[0].split()
        if "PAUSE" in words and not os.path.exists(os.path.join(self.markers, "release")):
            open(os.path.join(self.markers, "paused"), "w").close()
            deadline = time.monotonic() + HANG_GUARD_SECS
            while not os.path.exists(os.path.join(self.markers, "release")) and time.monotonic() < deadline:
                time.sleep(0.01)
        for w in words:
            collector.emit([w])


@pytest.fixture
def table():
    need_postgres()
    name = f"sink_{uuid.uuid4().hex[:10]}"
    yield name
    PostgresMapState.factory(None, "transactional", table=name).drop()


def test_counts_exact_when_the_query_stops_mid_batch(spark_session, tmp_path, table):
    src, markers = tmp_path / "src", tmp_path / "markers"
    truth = write_corpus(str(src), files=4, lines=60, seed=5)
    with open(src / "part-0001.jsonl", "a", encoding="utf-8") as f:  # batch 1 pauses at this row
        f.write('{"sentence": "PAUSE here"}\n')
    truth.update(["PAUSE", "here"])
    markers.mkdir()

    def start() -> tuple:
        t = TridentTopology()
        (t.new_stream("rows", SparkBatchSpout(["sentence"])).each(["sentence"], SplitPausing(str(markers)), ["word"])
         .group_by(["word"]).persistent_aggregate(PostgresMapState.factory(None, "transactional", table=table),
                                                  Count(), ["count"]).parallelism_hint(2))
        sink = TridentSink(t)
        df = spark_session.readStream.schema("sentence string").option("maxFilesPerTrigger", 1).json(str(src))
        return sink, df.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ckpt")).start()

    sink, query = start()
    wait_for(markers / "paused", "pause in batch 1")
    stopper = threading.Thread(target=query.stop)
    stopper.start()
    time.sleep(1.0)  # the stop is under way while batch 1 is still in the topology (the result holds either way)
    (markers / "release").touch()
    stopper.join(HANG_GUARD_SECS)
    assert not stopper.is_alive()
    sink.close()

    sink, query = start()
    try:
        query.processAllAvailable()
        assert query.isActive, query.exception()
        assert sink.last_batch["batch_id"] == 3
    finally:
        query.stop()
        sink.close()
    assert stored_counts(table, sorted(truth)) == dict(truth)


def test_counts_exact_when_the_driver_is_killed_mid_commit(tmp_path, table):
    src, markers = tmp_path / "src", tmp_path / "markers"
    truth = write_corpus(str(src), files=4, lines=60, seed=9)
    markers.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}

    def run(stop_txid: int) -> subprocess.Popen:
        cmd = [sys.executable, str(JOB), str(src), str(tmp_path / "ckpt"), table, str(markers), str(stop_txid), "0"]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(tmp_path / f"job{stop_txid}.err", "w"),
                                text=True, env=env, start_new_session=True)

    first = run(1)  # pauses once state partition 0 holds batch 1 (partition 1 and the coordinator do not)
    try:
        wait_for(markers / "paused", "pause in the commit of batch 1", first)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the job's own group: its driver, JVM and Python workers
        first.wait()
    partial = stored_counts(table, sorted(truth))
    assert any(v is not None for v in partial.values()) and partial != dict(truth)

    second = run(-1)
    try:
        out, _ = second.communicate(timeout=HANG_GUARD_SECS)
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
    assert second.returncode == 0, (tmp_path / "job-1.err").read_text()[-3000:]
    assert "DONE" in out
    assert stored_counts(table, sorted(truth)) == dict(truth)


def test_a_spark_batch_spout_without_columns_emits_the_row(spark_session, tmp_path):
    t = TridentTopology()
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['sentence'\]; the stream has \['row'\]"):
        t.new_stream("rows", SparkBatchSpout()).each(["sentence"], Split(), ["word"])
    t = TridentTopology()
    state = (t.new_stream("rows", SparkBatchSpout()).each(["row"], WordsOfRow(), ["word"]).group_by(["word"])
             .persistent_aggregate(MemoryMapState.factory("transactional"), Count(), ["count"]))
    sink = TridentSink(t)
    try:
        df = spark_session.createDataFrame([("a b", 1), ("b", 2)], "sentence string, n int")
        sink(df, 0)
        sink(df, 0)  # Spark runs a batch again after a crash: the state holds it, the call returns at once
    finally:
        sink.close()
    assert sink.last_batch["skipped"] and sink.last_batch["rows"] == 2
    assert state.multi_get([["a"], ["b"]]) == [1, 2]
    with pytest.raises(ValueError, match="one stream from a SparkBatchSpout"):
        TridentSink(TridentTopology())


class WordsOfRow(BaseFunction):
    def execute(self, t, collector):
        for w in t[0]["sentence"].split():
            collector.emit([w])
