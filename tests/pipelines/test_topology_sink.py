"""A topology as the foreachBatch sink of a real Structured Streaming query (`local[2,4]`): a JSON
file source of 3 files x 1,000 rows with 5 poison rows that the bolt raises on. The query stays
active, every good row is processed, the 5 are dead-lettered with their error, Spark's progress
shows the 3,000 rows; and the same topology with a spout of its own gives the same results."""

from __future__ import annotations

import glob
import json
import os
import zlib

import pytest

from squall import BasicBolt, Config, LocalCluster, Spout, TopologyBuilder
from squall.spark import TopologySink

FILES, ROWS = 3, 1000
POISON = {7, 1210, 1999, 2500, 2998}


class Enrich(BasicBolt):
    """Doubles `n`; raises on a poison row, every time."""

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "doubled"])

    def execute(self, t, collector):
        if t["bad"]:
            raise ValueError(f"poison row {t['id']}")
        collector.emit([t["id"], t["n"] * 2])


class Record(BasicBolt):
    """Appends each input as a JSON line to a file of its own task in `directory`."""

    def __init__(self, directory):
        self.directory = directory

    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context):
        self.path = os.path.join(self.directory, f"out-{context.this_task_id}-{os.getpid()}.jsonl")

    def execute(self, t, collector):
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(t.values) + "\n")


class Rows(Spout):
    """The same rows as the query reads, from the same files, as an ordinary spout (msg id: the id)."""

    def __init__(self, src):
        self.src = src

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "n", "bad"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.rows = [json.loads(line) for p in sorted(glob.glob(os.path.join(self.src, "*.json")))
                     for line in open(p, encoding="utf-8")]
        self.failed: set[int] = set()

    def next_tuple(self):
        if self.rows:
            r = self.rows.pop(0)
            self.collector.emit([r["id"], r["n"], r["bad"]], msg_id=r["id"])

    def fail(self, msg_id):
        self.failed.add(msg_id)


def write_source(src) -> None:
    os.makedirs(src)
    for i in range(FILES):
        with open(os.path.join(src, f"part-{i}.json"), "w", encoding="utf-8") as f:
            for j in range(ROWS):
                k = i * ROWS + j
                f.write(json.dumps({"id": k, "n": zlib.crc32(str(k).encode()) % 1000, "bad": k in POISON}) + "\n")


def topology(out) -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_bolt("enrich", Enrich(), parallelism=2).shuffle_grouping("rows")
    b.set_bolt("record", Record(str(out)), parallelism=2).shuffle_grouping("enrich")
    return b


def recorded(out) -> dict[int, int]:
    got: dict[int, int] = {}
    for p in glob.glob(os.path.join(out, "out-*.jsonl")):
        for line in open(p, encoding="utf-8"):
            k, v = json.loads(line)
            assert k not in got or got[k] == v
            got[k] = v
    return got


def expected() -> dict[int, int]:
    return {k: 2 * (zlib.crc32(str(k).encode()) % 1000) for k in range(FILES * ROWS) if k not in POISON}


@pytest.fixture
def source(tmp_path):
    src = tmp_path / "src"
    write_source(src)
    return src


def test_poison_rows_are_dead_lettered_and_the_query_runs_on(spark_session, source, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    letters = tmp_path / "dead.jsonl"
    sink = TopologySink(topology(out), conf={Config.SQUALL_DEAD_LETTER_PATH: str(letters),
                                             Config.SQUALL_MAX_REPLAYS: 2})
    df = spark_session.readStream.schema("id long, n long, bad boolean").option("maxFilesPerTrigger", 1) \
        .json(str(source))
    query = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ckpt")).start()
    try:
        query.processAllAvailable()
        assert query.isActive, query.exception()
        progress = query.recentProgress
    finally:
        query.stop()
        sink.close()
    assert sum(p["numInputRows"] for p in progress) == FILES * ROWS
    assert recorded(out) == expected()
    dead = [json.loads(line) for line in open(letters, encoding="utf-8")]
    assert sorted(d["values"]["id"] for d in dead) == sorted(POISON)
    for d in dead:
        assert d["error"] == f"ValueError: poison row {d['values']['id']}"
        assert d["attempts"] == 3 and d["failed_in"] == "enrich"
        assert d["msg_id"][0] in range(FILES)
    assert sink.last_batch["rows"] == ROWS
    assert sink.last_batch["acked"] + sink.last_batch["dead_lettered"] == ROWS
    assert sink.last_batch["replayed"] == 2 * sink.last_batch["dead_lettered"]


def test_the_sink_and_an_ordinary_topology_agree(spark_session, source, tmp_path):
    via_sink, own = tmp_path / "sink", tmp_path / "own"
    via_sink.mkdir()
    own.mkdir()
    letters = tmp_path / "dead.jsonl"
    sink = TopologySink(topology(via_sink), conf={Config.SQUALL_DEAD_LETTER_PATH: str(letters),
                                                  Config.SQUALL_MAX_REPLAYS: 0}, name="agree")
    df = spark_session.readStream.schema("id long, n long, bad boolean").json(str(source))
    query = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ckpt")).start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
        sink.close()

    b = topology(own)
    b.set_spout("rows", Rows(str(source)))
    with LocalCluster(engine="spark", spark=spark_session) as cluster:
        cluster.submit_topology("own", {Config.TOPOLOGY_MAX_SPOUT_PENDING: 500}, b.create_topology())
        cluster.wait_idle(120)
        (spout,) = cluster.spout_instances("own", "rows")
    assert recorded(via_sink) == recorded(own) == expected()
    assert sorted(json.loads(line)["values"]["id"] for line in open(letters, encoding="utf-8")) \
        == sorted(spout.failed) == sorted(POISON)


def test_a_sink_refuses_a_builder_that_has_its_spout_id(tmp_path):
    b = topology(tmp_path)
    b.set_spout("rows", Rows(str(tmp_path)))
    with pytest.raises(ValueError, match="already has a component of that id"):
        TopologySink(b)


def test_the_readme_pipeline_example_runs(spark_session):
    """examples/spark_pipeline.py, as the README shows it: orders enriched into PostgreSQL, the
    poison order dead-lettered while the query runs on."""
    import importlib.util  # noqa: PLC0415

    from tests.support.broker_services import need_postgres  # noqa: PLC0415

    dsn = need_postgres()
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "spark_pipeline.py")
    spec = importlib.util.spec_from_file_location("spark_pipeline_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    table = f"orders_{zlib.crc32(path.encode()) % 100000}_{os.getpid()}"
    import psycopg  # noqa: PLC0415

    try:
        got = example.main(table=table)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    assert got["written"] == 299
    assert [(d["values"]["order_id"], d["error"]) for d in got["dead"]] == \
        [(150, "ValueError: order 150: quantity 0 is not positive")]
