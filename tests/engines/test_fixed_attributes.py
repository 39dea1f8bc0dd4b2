"""A bolt's `fixed_attributes` (engine/tasks/fixed_parts.py), on both engines alike: what it builds once
is there in every wave, an attribute assigned anew is carried anew, one changed in place is
reported and the task goes on carrying its whole instance. On Spark a fixed attribute is pickled
once, not with every snapshot of its task."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from squall import BasicBolt, Config, InvalidTopologyException, Spout, TopologyBuilder
from squall.api.components import user_instance
from squall.columnar import ColumnarBolt
from squall.engine.tasks.fixed_parts import fixed_names
from squall.testing import complete_topology
from squall.windowing import BaseWindowedBolt, Count

WORDS = ["apple", "pear", "fig", "plum", "kiwi"]
FEED = [[WORDS[(i * 3) % len(WORDS)]] for i in range(30)]  # each word six times


class Words(Spout):  # replaced by complete_topology's mocked tuples
    def declare_output_fields(self, d):
        d.declare(["word"])


class Enrich(BasicBolt):
    """Codes each word from a table built in prepare; counts each word's occurrences (carried)."""

    fixed_attributes = ("table",)

    def declare_output_fields(self, d):
        d.declare(["word", "code", "nth"])

    def prepare(self, conf, context):
        self.table = {w: 10 * i for i, w in enumerate(WORDS)}
        self.nth: dict[str, int] = {}

    def execute(self, t, collector):
        w = t["word"]
        self.nth[w] = self.nth.get(w, 0) + 1
        collector.emit([w, self.table[w], self.nth[w]])


class Reassign(Enrich):
    """Assigns a new table after each word: the next occurrence's code is 1 more."""

    def execute(self, t, collector):
        super().execute(t, collector)
        w = t["word"]
        self.table = {**self.table, w: self.table[w] + 1}


class Mutate(Enrich):
    """Breaks the contract: changes its fixed table in place."""

    def execute(self, t, collector):
        super().execute(t, collector)
        self.table[t["word"]] += 1


def run(bolt, cluster_kwargs, conf=None):
    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("enrich", bolt, parallelism=2).fields_grouping("words", ["word"])
    conf = Config({Config.TOPOLOGY_MAX_SPOUT_PENDING: 1, **(conf or {})})  # one word a wave
    return complete_topology(b.create_topology(), mocked_sources={"words": FEED}, conf=conf, **cluster_kwargs)


def test_fixed_table_is_there_in_every_wave(cluster_kwargs):
    result = run(Enrich(), cluster_kwargs)
    expected = sorted([w, 10 * WORDS.index(w), n] for w in WORDS for n in range(1, 7))
    assert sorted(result.emitted("enrich")) == expected
    assert len(result.acked("words")) == len(FEED) and not result.failed("words")
    assert not result.errors


def test_a_table_assigned_anew_is_carried_anew(cluster_kwargs):
    result = run(Reassign(), cluster_kwargs)
    expected = sorted([w, 10 * WORDS.index(w) + n - 1, n] for w in WORDS for n in range(1, 7))
    assert sorted(result.emitted("enrich")) == expected
    assert not result.errors


def test_a_table_changed_in_place_is_reported_once_per_task(cluster_kwargs):
    result = run(Mutate(), cluster_kwargs, {Config.SQUALL_FIXED_CHECK_WAVES: 1})
    found = [e for e in result.errors if "changed in place" in e.error]
    assert found, result.errors
    assert all(e.kind == "user" and e.component == "enrich" and "['table']" in e.error for e in found)
    assert len({e.task for e in found}) == len(found)  # once a task: it then carries its instance whole
    assert len(result.emitted("enrich")) == len(FEED)  # every word still processed and acked


def test_a_misspelled_name_is_reported_once(cluster_kwargs):
    class Misspelled(Enrich):
        fixed_attributes = ("tabel",)

    result = run(Misspelled(), cluster_kwargs)
    found = [e for e in result.errors if "tabel" in e.error]
    assert len(found) == 2 and len({e.task for e in found}) == 2, result.errors  # once for each task
    assert len(result.emitted("enrich")) == len(FEED)


def test_fixed_attributes_must_name_attributes():
    class OneString(Enrich):
        fixed_attributes = "table"

    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("enrich", OneString()).shuffle_grouping("words")
    with pytest.raises(InvalidTopologyException, match=r"fixed_attributes must be a tuple of attribute names"):
        b.create_topology()


class Counted:
    """A table that notes each time it is pickled, in a file: Spark's Python workers pickle it."""

    def __init__(self, path: str, data: dict):
        self.path, self.data = path, data

    def __getitem__(self, key):
        return self.data[key]

    def __reduce__(self):
        with open(self.path, "a") as f:
            f.write("pickled\n")
        return Counted, (self.path, self.data)


class CountedEnrich(Enrich):
    def __init__(self, path: str):
        self.path = path

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.table = Counted(self.path, self.table)


class CountedPlain(CountedEnrich):
    fixed_attributes = ()


def count_pickles(bolt: type, spark_session, tmp_path, conf: dict) -> int:
    """How many times the table of `bolt` is pickled while the Spark engine runs FEED, a word a wave."""
    path = str(tmp_path / "pickles")
    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("enrich", bolt(path), parallelism=1).shuffle_grouping("words")
    conf = Config({Config.TOPOLOGY_MAX_SPOUT_PENDING: 1, Config.SQUALL_FIXED_CHECK_WAVES: 0, **conf})
    result = complete_topology(b.create_topology(), mocked_sources={"words": FEED}, conf=conf, engine="spark",
                               spark=spark_session)
    assert len(result.emitted("enrich")) == len(FEED)
    return len(open(path).read().splitlines()) if os.path.exists(path) else 0


@pytest.mark.parametrize("bolt", [CountedEnrich, CountedPlain])
def test_slot_tasks_pickle_a_table_for_their_snapshots_only(bolt, spark_session, tmp_path, monkeypatch):
    """A task in a slot is pickled only for a snapshot (here every 10 waves: waves 1, 11, 21, and
    31 if the run goes on that long before it is idle), and its fixed table only the first time: it
    is written once, to a file named by its token."""
    from squall.engine.resident import recovery

    monkeypatch.setattr(recovery, "SNAPSHOT_WORK", float("inf"))  # by the wave count alone
    snapshots = []
    due = recovery.WaveRecovery._snapshot_due

    def counted(self, n):
        if due(self, n):
            snapshots.append(n)
            return True
        return False

    monkeypatch.setattr(recovery.WaveRecovery, "_snapshot_due", counted)
    pickles = count_pickles(bolt, spark_session, tmp_path, {Config.SQUALL_SNAPSHOT_WAVES: 10})
    assert snapshots[:3] == [1, 11, 21] and all(b - a == 10 for a, b in zip(snapshots, snapshots[1:]))
    assert pickles == (len(snapshots) if bolt is CountedPlain else 1)


class ColumnCoder(ColumnarBolt):
    """A columnar bolt with a fixed table: codes a batch of words at once."""

    fixed_attributes = ("codes",)

    def declare_output_fields(self, d):
        d.declare(["word", "code"])

    def prepare(self, conf, context):
        self.codes = {w: 10 * i for i, w in enumerate(WORDS)}

    def execute_batch(self, batch, c):
        words = batch.column(0).to_pylist()
        c.emit_batch({"word": pa.array(words), "code": pa.array([self.codes[w] for w in words], pa.int64())},
                     np.arange(batch.num_rows))


def test_a_columnar_bolt_has_its_fixed_table_in_every_wave(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("coder", ColumnCoder(), parallelism=2).shuffle_grouping("words")
    conf = Config({Config.TOPOLOGY_MAX_SPOUT_PENDING: 1})
    result = complete_topology(b.create_topology(), mocked_sources={"words": FEED}, conf=conf, **cluster_kwargs)
    assert sorted(result.emitted("coder")) == sorted([w[0], 10 * WORDS.index(w[0])] for w in FEED)
    assert not result.errors


class WindowCoder(BaseWindowedBolt):
    """A windowed bolt with a fixed table (the engine holds it inside its window executor)."""

    fixed_attributes = ("codes",)

    def declare_output_fields(self, d):
        d.declare(["codes"])

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.codes = {w: 10 * i for i, w in enumerate(WORDS)}

    def execute(self, window):
        self.collector.emit([[self.codes[t["word"]] for t in window.get()]])


def test_a_windowed_bolt_has_its_fixed_table_in_every_wave(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("coder", WindowCoder().with_tumbling_window(Count(3)), parallelism=1).global_grouping("words")
    conf = Config({Config.TOPOLOGY_MAX_SPOUT_PENDING: 6, Config.SQUALL_WAVE_MAX_TUPLES: 2})  # windows span waves
    topology = b.create_topology()
    assert fixed_names(user_instance(topology.specs["coder"].obj)) == ("codes",)  # found inside the executor
    result = complete_topology(topology, mocked_sources={"words": FEED}, conf=conf, **cluster_kwargs)
    codes = [10 * WORDS.index(w[0]) for w in FEED]
    assert result.emitted("coder") == [[codes[i:i + 3]] for i in range(0, len(FEED), 3)]
    assert not result.errors
