"""The submit-time refusal of host-local resources on a Spark cluster (squall.engine.spark.host_local),
without a cluster: SQLite state, any object declaring HOST_LOCAL = True, and the checkpoint
directory; local[...] masters, shared paths and the driver's own dead-letter file pass."""

from __future__ import annotations

import pytest

from squall.engine.spark.host_local import (
    HostLocalResourceError,
    check_cluster_resources,
    host_local_objects,
    is_shared,
)
from squall.trident import MemoryMapState, PostgresMapState, SQLiteMapState

CLUSTER = "spark://10.0.0.1:7077"
SHARED = {"squall.shared.paths": ["/mnt/shared"], "squall.checkpoint.dir": "/mnt/shared/ckpt",
          "squall.dead.letter.path": "/mnt/shared/dead.jsonl"}


class HoldsState:
    """A component holding a state factory a few attributes deep, as Trident's state bolt does."""

    def __init__(self, factory: object):
        self.spec = {"states": [factory]}


class FutureProvider:  # any class that declares only the attribute, as squall.state's providers do
    HOST_LOCAL = True

    def __init__(self, path: str | None = None):
        if path:
            self.path = path


def test_sqlite_state_is_refused_on_a_cluster_and_named(tmp_path):
    comps = {"count": HoldsState(SQLiteMapState.factory(str(tmp_path / "c.db"), "transactional"))}
    with pytest.raises(HostLocalResourceError) as e:
        check_cluster_resources(CLUSTER, SHARED, comps)
    msg = str(e.value)
    assert "count.spec['states'][0] (SQLiteStateFactory" in msg
    assert "PostgreSQL or Redis" in msg and "squall.shared.paths" in msg


def test_local_master_allows_everything(tmp_path):
    comps = {"count": HoldsState(SQLiteMapState.factory(str(tmp_path / "c.db"), "transactional"))}
    check_cluster_resources("local[2]", {}, comps)  # no checkpoint dir, a dead-letter file, SQLite: one host


def test_shared_stores_pass():
    comps = {"a": HoldsState(PostgresMapState.factory("host=db", "opaque")),
             "b": HoldsState(MemoryMapState.factory("opaque"))}  # kept on the driver: one copy
    check_cluster_resources(CLUSTER, SHARED, comps)


def test_sqlite_under_a_declared_shared_path_passes():
    comps = {"count": HoldsState(SQLiteMapState.factory("/mnt/shared/c.db", "transactional"))}
    check_cluster_resources(CLUSTER, SHARED, comps)


def test_any_host_local_object_is_refused_by_duck_typing():
    assert host_local_objects({"bolt": FutureProvider()}, {}) == ["bolt (FutureProvider)"]
    assert host_local_objects({"bolt": HoldsState(FutureProvider("/data/x"))}, SHARED) \
        == ["bolt.spec['states'][0] (FutureProvider, path '/data/x')"]
    assert host_local_objects({"bolt": FutureProvider("/mnt/shared/x")}, SHARED) == []


def test_the_default_dead_letter_file_passes_on_a_cluster():
    """Only the driver writes dead letters: the default file, on its disk, is one file."""
    conf = {k: v for k, v in SHARED.items() if k != "squall.dead.letter.path"}
    check_cluster_resources(CLUSTER, conf, {})
    check_cluster_resources(CLUSTER, {**conf, "squall.dead.letter.path": "dead.jsonl"}, {})


def test_checkpoint_dir_is_required_and_a_directory():
    conf = dict(SHARED)
    del conf["squall.checkpoint.dir"]
    with pytest.raises(HostLocalResourceError, match="no 'squall.checkpoint.dir'"):
        check_cluster_resources(CLUSTER, conf, {})
    with pytest.raises(HostLocalResourceError, match="written with the file system"):
        check_cluster_resources(CLUSTER, {**conf, "squall.checkpoint.dir": "hdfs://nn:8020/squall"}, {})
    check_cluster_resources(CLUSTER, SHARED, {})


def test_shared_path_matching():
    conf = {"squall.shared.paths": "/mnt/a, /srv/b/"}
    assert is_shared("/mnt/a/x/y", conf) and is_shared("/srv/b", conf) and is_shared("s3a://bucket/k", conf)
    assert not is_shared("/mnt/ab/x", conf)  # a prefix of the name is not the directory
    assert not is_shared("file:///tmp/x", conf) and not is_shared("/tmp/x", {})


def test_every_problem_is_listed_at_once(tmp_path):
    comps = {"count": HoldsState(SQLiteMapState.factory(str(tmp_path / "c.db"), "opaque"))}
    with pytest.raises(HostLocalResourceError) as e:
        check_cluster_resources(CLUSTER, {}, comps)
    assert str(e.value).count("\n- ") == 2  # the state, and no checkpoint directory
