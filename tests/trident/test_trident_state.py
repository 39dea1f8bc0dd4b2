"""The Trident state layer: Storm's StateTest (values, opaque and transactional maps), then every
store x kind through batches, replays, reopening and crashes.

PostgreSQL (127.0.0.1:5432, database ``test``) and Redis (127.0.0.1:6379) tests skip when the
server is unreachable, and fail instead when ``CI=true``. Each test uses its own table / key
prefix and removes it afterwards.
"""

from __future__ import annotations

import base64
import gc
import os
import pickle
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from squall.trident.state import (
    KINDS,
    IBackingMap,
    MapState,
    MemoryMapState,
    MetaStore,
    NonTransactionalMap,
    OpaqueMap,
    OpaqueValue,
    PostgresMapState,
    RedisMapState,
    SQLiteMapState,
    StateFactory,
    TransactionalMap,
    TransactionalValue,
)
from squall.trident.state import memory as memory_module
from squall.trident.state.postgres import default_dsn
from squall.trident.state.redis_state import redact_url
from squall.trident.state.values import value_codec

ROOT = Path(__file__).resolve().parents[2]
CI = os.environ.get("CI", "").lower() == "true"
BACKENDS = ["memory", "sqlite", "postgres", "redis"]


def _unavailable(reason: str):
    if CI:
        pytest.fail(f"{reason} (CI=true: this server is required)", pytrace=False)
    pytest.skip(reason)


def add(n):
    """Storm's CombinerValueUpdater(Count, n): the stored count plus n."""
    return lambda old: n if old is None else old + n


def single_get(m, key):
    return m.multi_get([[key]])[0]


def single_update(m, key, amt):
    return m.multi_update([[key]], [add(amt)])[0]


# ---------------------------------------------------------------------------------------------
# Stores


@pytest.fixture(scope="session")
def pg_dsn():
    try:
        import psycopg
    except ImportError:
        _unavailable("psycopg is not installed (pip install 'squall[connectors]')")
    if os.environ.get("SQUALL_PG_DSN"):
        candidates = [os.environ["SQUALL_PG_DSN"]]
    else:
        candidates = [default_dsn(), "host=127.0.0.1 port=5432 dbname=test user=root"]
    errors = []
    for dsn in candidates:
        try:
            psycopg.connect(dsn, connect_timeout=3).close()
            return dsn
        except psycopg.Error as e:
            errors.append(str(e).strip().splitlines()[0])
    _unavailable(f"PostgreSQL unreachable ({'; '.join(errors)})")


@pytest.fixture(scope="session")
def redis_url():
    try:
        import redis
    except ImportError:
        _unavailable("redis-py is not installed (pip install 'squall[connectors]')")
    url = os.environ.get("SQUALL_REDIS_URL") or "redis://127.0.0.1:6379/0"
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=3)
        client.ping()
        client.close()
    except redis.RedisError as e:
        _unavailable(f"Redis unreachable at {redact_url(url)} ({e})")
    return url


class Store:
    """One backend under test: makes factories in a fresh namespace, reopens them (a new
    factory object on the same file/table/prefix), reads meta rows straight from the store
    (bypassing this process's commit scope) and cleans up."""

    def __init__(self, name: str, tmp_path: Path, location: str | None = None) -> None:
        self.name = name
        self.tmp_path = tmp_path
        self.location = location
        self.made: list = []

    def make(self, kind: str):
        ns = f"t_{uuid.uuid4().hex[:12]}"
        if self.name == "memory":
            f = MemoryMapState.factory(kind)
        elif self.name == "sqlite":
            f = SQLiteMapState.factory(self.tmp_path / "state.db", kind, table=ns)
        elif self.name == "postgres":
            f = PostgresMapState.factory(self.location, kind, table=ns)
        else:
            f = RedisMapState.factory(self.location, kind, prefix=f"squall_test:{ns}")
        self.made.append(f)
        return f

    def reopen(self, f):
        if self.name == "memory":
            return type(f)(f.kind, f.db_id)
        if self.name == "sqlite":
            return SQLiteMapState.factory(f.path, f.kind, table=f.table)
        if self.name == "postgres":
            return PostgresMapState.factory(f.dsn, f.kind, table=f.table)
        return RedisMapState.factory(f.url, f.kind, prefix=f.prefix)

    def raw_meta(self, f, key: str) -> bytes | None:
        if self.name == "memory":
            return memory_module._db(f.db_id).meta.get(key)
        if self.name == "sqlite":
            with sqlite3.connect(f.path) as conn:
                row = conn.execute("SELECT v FROM squall_meta WHERE ns = ? AND k = ?", (f.table, key)).fetchone()
            return None if row is None else bytes(row[0])
        if self.name == "postgres":
            import psycopg

            with psycopg.connect(f.dsn) as conn:
                row = conn.execute("SELECT v FROM squall_meta WHERE ns = %s AND k = %s", (f.table, key)).fetchone()
            return None if row is None else bytes(row[0])
        import redis

        client = redis.Redis.from_url(f.url)
        try:
            return client.hget(f"{{{f.prefix}}}:meta", key)
        finally:
            client.close()

    def cleanup(self) -> None:
        for f in self.made:
            if self.name == "memory":
                f.clear()
            elif self.name in ("postgres", "redis"):
                f.drop()


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path):
    name = request.param
    location = None
    if name == "postgres":
        location = request.getfixturevalue("pg_dsn")
    elif name == "redis":
        location = request.getfixturevalue("redis_url")
    s = Store(name, tmp_path, location)
    yield s
    gc.collect()  # states dropped by a test let go of their connections before the tables go
    s.cleanup()


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


class DictBackingMap:
    """A bare IBackingMap (no commit protocol), as Storm's MemoryBackingMap."""

    def __init__(self) -> None:
        self.db = {}

    def multi_get(self, keys):
        return [self.db.get(tuple(k)) for k in keys]

    def multi_put(self, keys, vals):
        for k, v in zip(keys, vals):
            self.db[tuple(k)] = v


# ---------------------------------------------------------------------------------------------
# Storm's StateTest


def test_opaque_value():
    v = OpaqueValue(8, "v1", "v0")
    assert v.get(None) == "v1"
    assert v.get(100) == "v1"
    assert v.get(9) == "v1"
    assert v.get(8) == "v0"
    with pytest.raises(ValueError, match="behind"):
        v.get(7)
    assert (v.prev, v.curr, v.curr_txid) == ("v0", "v1", 8)
    up0 = v.update(8, "v2")  # a replay of batch 8 keeps the value from before it
    assert (up0.curr_txid, up0.curr, up0.prev) == (8, "v2", "v0")
    assert up0 is not v
    up1 = v.update(9, "v2")  # a new batch: the current value becomes prev
    assert (up1.curr_txid, up1.curr, up1.prev) == (9, "v2", "v1")
    assert up1 is not v
    assert v == OpaqueValue(8, "v1", "v0")  # unchanged
    with pytest.raises(ValueError, match="behind"):
        v.update(7, "x")


def test_values_equality_repr_json():
    assert TransactionalValue(3, {"n": [1, 2]}) == TransactionalValue(3, {"n": [1, 2]})
    assert TransactionalValue(3, 1) != TransactionalValue(4, 1)
    assert repr(TransactionalValue(3, "x")) == "TransactionalValue(txid=3, val='x')"
    assert OpaqueValue(2, 5) == OpaqueValue(2, 5, None)
    assert OpaqueValue(2, 5, 1) != OpaqueValue(2, 5, 2)
    assert repr(OpaqueValue(2, 5, 1)) == "OpaqueValue(curr_txid=2, curr=5, prev=1)"
    for v in (TransactionalValue(7, ["a", 1.5, None, True]), TransactionalValue(None, 0)):
        assert TransactionalValue.from_json(v.to_json()) == v
        assert TransactionalValue.from_json(v.to_json().encode()) == v
    for v in (OpaqueValue(7, {"k": "é"}, 3), OpaqueValue(1, 2)):
        assert OpaqueValue.from_json(v.to_json()) == v
    # a table read back with the wrong kind says so
    _, decode_tx = value_codec("transactional")
    with pytest.raises(ValueError, match="another kind"):
        decode_tx(OpaqueValue(1, 2).to_json())
    with pytest.raises(ValueError, match="unknown state kind"):
        value_codec("exactly-once")


def test_opaque_value_without_txid_is_older_than_any_batch():
    v = OpaqueValue(None, "c", "p")  # written outside a batch
    assert v.get(1) == "c"
    assert v.update(1, "n") == OpaqueValue(1, "n", "c")


def _storm_opaque_map(m):
    m.begin_commit(1)
    assert single_get(m, "a") is None
    # intra-batch caching: a key updated twice in one batch builds on its own new value
    assert single_update(m, "a", 1) == 1
    assert single_get(m, "a") == 1
    assert single_update(m, "a", 2) == 3
    assert single_get(m, "a") == 3
    m.commit(1)
    # batch 1 again, with other tuples: recomputed from the value before batch 1
    m.begin_commit(1)
    assert single_get(m, "a") is None
    assert single_update(m, "a", 2) == 2
    m.commit(1)
    m.begin_commit(2)
    assert single_get(m, "a") == 2
    assert single_update(m, "a", 3) == 5
    assert single_update(m, "a", 1) == 6
    m.commit(2)
    assert single_get(m, "a") == 6


def _storm_transactional_map(m):
    m.begin_commit(1)
    assert single_get(m, "a") is None
    assert single_update(m, "a", 1) == 1
    assert single_update(m, "a", 2) == 3
    m.commit(1)
    m.begin_commit(1)
    assert single_get(m, "a") == 3
    # batch 1 was applied already: intra-batch caching has no effect on a replay
    assert single_update(m, "a", 1) == 3
    assert single_update(m, "a", 2) == 3
    m.commit(1)
    m.begin_commit(2)
    assert single_get(m, "a") == 3
    assert single_update(m, "a", 3) == 6
    assert single_update(m, "a", 1) == 7
    m.commit(2)
    assert single_get(m, "a") == 7


def test_storm_opaque_map_over_bare_backing_map():
    backing = DictBackingMap()
    assert isinstance(backing, IBackingMap)
    _storm_opaque_map(OpaqueMap.build(backing))
    assert backing.db[("a",)] == OpaqueValue(2, 6, 2)


def test_storm_transactional_map_over_bare_backing_map():
    backing = DictBackingMap()
    _storm_transactional_map(TransactionalMap.build(backing))
    assert backing.db[("a",)] == TransactionalValue(2, 7)


def test_storm_map_tests_on_every_store(store):
    _storm_opaque_map(store.make("opaque").make_state({}, 0, 1))
    _storm_transactional_map(store.make("transactional").make_state({}, 0, 1))


def test_non_transactional_map_applies_a_replay_again():
    m = NonTransactionalMap.build(DictBackingMap())
    for _ in range(2):
        m.begin_commit(1)
        single_update(m, "a", 5)
        m.commit(1)
    assert single_get(m, "a") == 10


def test_opaque_map_refuses_a_batch_behind_the_state():
    m = OpaqueMap(DictBackingMap())
    m.begin_commit(5)
    single_update(m, "a", 1)
    m.commit(5)
    m.begin_commit(4)
    with pytest.raises(ValueError, match="behind the state's batch txid 5"):
        single_get(m, "a")


def test_multi_put_per_kind():
    t, o, n = DictBackingMap(), DictBackingMap(), DictBackingMap()
    for m in (TransactionalMap(t), OpaqueMap(o), NonTransactionalMap(n)):
        m.begin_commit(3)
        m.multi_put([["a"], ["b", 1]], [10, [1, 2]])
        m.commit(3)
        assert m.multi_get([["a"], ["b", 1], ["z"]]) == [10, [1, 2], None]
    assert t.db[("a",)] == TransactionalValue(3, 10)
    assert o.db[("a",)] == OpaqueValue(3, 10, None)
    assert n.db[("a",)] == 10


def test_updater_objects_with_update_method_are_accepted():
    class CombinerValueUpdater:
        def __init__(self, arg):
            self.arg = arg

        def update(self, stored):
            return self.arg if stored is None else stored + self.arg

    m = TransactionalMap(DictBackingMap())
    m.begin_commit(1)
    assert m.multi_update([["a"], ["b"]], [CombinerValueUpdater(2), CombinerValueUpdater(3)]) == [2, 3]
    m.commit(1)


# ---------------------------------------------------------------------------------------------
# Every store x kind: batches, replays, reopening


# What a, b, c hold after the scenario below, per kind.
EXPECTED = {
    "transactional": {"a": 15, "b": 2, "c": 4},  # replays skipped (they must be identical)
    "opaque": {"a": 112, "b": 2, "c": 200},  # the different replay recomputed from prev
    "non-transactional": {"a": 118, "b": 2, "c": 208},  # every replay applied again
}


def test_batches_replays_and_reopen(store, kind):
    f = store.make(kind)
    assert f.kind == kind and isinstance(f, StateFactory)
    assert kind in f.describe()
    s = f.make_state({}, 0, 2)
    assert isinstance(s, MapState)
    meta = f.meta_store({})
    assert isinstance(meta, MetaStore)
    meta.put("batch/1", b'{"offsets": [0, 3]}')  # outside a commit: written at once
    assert store.raw_meta(f, "batch/1") == b'{"offsets": [0, 3]}'

    s.begin_commit(1)
    assert s.multi_update([["a"], ["b"]], [add(1), add(2)]) == [1, 2]
    assert s.multi_update([["a"]], [add(10)]) == [11]  # same key again in the batch
    meta.put("txid", b"1")
    s.commit(1)

    s.begin_commit(2)
    assert s.multi_update([["a"], ["c"]], [add(3), add(4)]) == [14, 4]
    meta.put("txid", b"2")
    s.commit(2)

    # batch 2 replayed with the same tuples (its commit's outcome was unknown)
    s.begin_commit(2)
    again = s.multi_update([["a"], ["c"]], [add(3), add(4)])
    s.commit(2)
    assert again == ([17, 8] if kind == "non-transactional" else [14, 4])

    # batch 2 replayed with DIFFERENT tuples (an opaque spout may re-emit a txid differently)
    s.begin_commit(2)
    got = s.multi_update([["a"], ["c"]], [add(100), add(200)])
    s.commit(2)
    assert got == {"transactional": [14, 4], "opaque": [111, 200], "non-transactional": [117, 208]}[kind]

    s.begin_commit(3)
    s.multi_update([["a"]], [add(1)])
    meta.put("txid", b"3")
    s.commit(3)
    want = EXPECTED[kind]
    assert s.multi_get([["a"], ["b"], ["c"], ["nope"]]) == [want["a"], want["b"], want["c"], None]

    # what is stored per key
    stored = s.backing.multi_get([["a"]])[0]
    if kind == "transactional":
        assert stored == TransactionalValue(3, 15)
    elif kind == "opaque":
        assert stored == OpaqueValue(3, 112, 111)
    else:
        assert stored == 118

    # a new factory object on the same store, another partition: the committed values and records
    g = store.reopen(f)
    assert g is not f
    other = g.make_state({}, 1, 2)
    assert other.multi_get([["a"], ["b"], ["c"], ["nope"]]) == [want["a"], want["b"], want["c"], None]
    m2 = g.meta_store({})
    assert m2.get("txid") == b"3"
    assert m2.get("batch/1") == b'{"offsets": [0, 3]}'
    assert m2.get("missing") is None
    assert store.raw_meta(g, "txid") == b"3"
    for st in (s, other):
        st.close()


def test_batch_never_committed_leaves_nothing(store, kind):
    """A crash between begin_commit and commit: the connection is dropped, the state object
    lost. Neither its writes nor the meta writes made during the batch become visible."""
    f = store.make(kind)
    s = f.make_state({}, 0, 1)
    meta = f.meta_store({})
    s.begin_commit(1)
    s.multi_update([["a"]], [add(1)])
    meta.put("txid", b"1")
    s.commit(1)

    s.begin_commit(2)
    s.multi_update([["a"], ["d"]], [add(5), add(7)])
    s.multi_put([["e"]], [9])
    meta.put("txid", b"2")
    assert meta.get("txid") == b"2"  # the batch reads its own record
    assert store.raw_meta(f, "txid") == b"1"  # but it is not in the store
    # crash: the connection goes, the state object is lost, commit never runs
    backing = s.backing
    if store.name in ("sqlite", "postgres"):
        backing._conn.close()
    elif store.name == "redis":
        backing._client.close()
    del s, backing
    gc.collect()

    g = store.reopen(f)
    assert g.make_state({}, 0, 1).multi_get([["a"], ["d"], ["e"]]) == [1, None, None]
    assert g.meta_store({}).get("txid") == b"1"
    assert store.raw_meta(g, "txid") == b"1"
    # the coordinator's next records are written at once again (nothing waits for the lost state)
    g.meta_store({}).put("batch/2", b"again")
    assert store.raw_meta(g, "batch/2") == b"again"


def test_abort_discards_the_batch(store):
    f = store.make("opaque")
    s = f.make_state({}, 0, 1)
    meta = f.meta_store({})
    s.begin_commit(1)
    s.multi_update([["a"]], [add(1)])
    meta.put("txid", b"1")
    s.abort()
    assert s.multi_get([["a"]]) == [None]
    assert meta.get("txid") is None and store.raw_meta(f, "txid") is None
    # the same state runs the batch again
    s.begin_commit(1)
    s.multi_update([["a"]], [add(2)])
    s.commit(1)
    assert f.make_state().multi_get([["a"]]) == [2]
    s.close()


def test_meta_write_commits_with_the_last_open_state(store):
    """Partitions of one batch open in one process (interleaved, in one thread: no deadlock):
    the coordinator's record becomes durable with the last partition's commit."""
    f = store.make("transactional")
    p0, p1 = f.make_state({}, 0, 2), f.make_state({}, 1, 2)
    meta = f.meta_store({})
    p0.begin_commit(1)
    p1.begin_commit(1)
    p0.multi_update([["a"]], [add(1)])
    p1.multi_update([["b"]], [add(2)])
    meta.put("txid", b"1")
    p0.commit(1)
    assert store.raw_meta(f, "txid") is None
    assert f.make_state().multi_get([["a"], ["b"]]) == [1, None]
    p1.commit(1)
    assert store.raw_meta(f, "txid") == b"1"
    assert f.make_state().multi_get([["a"], ["b"]]) == [1, 2]
    # state meta_store() is the same store
    p0.meta_store().put("k", b"v")
    assert store.raw_meta(f, "k") == b"v"
    for p in (p0, p1):
        p.close()


@pytest.mark.parametrize("failure", ["commit fails", "abort", "dropped"])
def test_meta_write_is_dropped_when_one_partition_fails(store, failure):
    f = store.make("transactional")
    p0, p1 = f.make_state({}, 0, 2), f.make_state({}, 1, 2)
    meta = f.meta_store({})
    p0.begin_commit(1)
    p1.begin_commit(1)
    p0.multi_update([["a"]], [add(1)])
    p1.multi_update([["b"]], [add(2)])
    meta.put("txid", b"1")
    if failure == "commit fails":

        def broken_write(items, meta_rows):
            raise OSError("disk full")

        p0.backing._write = broken_write
        with pytest.raises(OSError, match="disk full"):
            p0.commit(1)
    elif failure == "abort":
        p0.abort()
    else:
        del p0
        gc.collect()
    p1.commit(1)  # the other partition's rows still commit, the batch record does not
    assert f.make_state().multi_get([["a"], ["b"]]) == [None, 2]
    assert store.raw_meta(f, "txid") is None
    assert meta.get("txid") is None
    p1.close()


def test_writes_outside_a_commit_are_immediate(store, kind):
    f = store.make(kind)
    s = f.make_state()
    s.multi_put([["x", 1]], [42])
    assert store.reopen(f).make_state().multi_get([["x", 1]]) == [42]
    s.close()


def test_meta_and_key_validation(store):
    f = store.make("opaque")
    s, meta = f.make_state(), f.meta_store()
    with pytest.raises(TypeError, match="bytes"):
        meta.put("k", "text")
    with pytest.raises(TypeError, match="list of values"):
        s.multi_get(["a"])
    with pytest.raises(ValueError, match="does not match"):
        s.begin_commit(1)
        s.commit(2)
    s.close()


# ---------------------------------------------------------------------------------------------
# Memory


def test_memory_factory_shares_one_dict_across_partitions_copies_and_pickles():
    f = MemoryMapState.factory("opaque")
    try:
        p0 = f.make_state({}, 0, 2)
        p0.begin_commit(1)
        p0.multi_update([["a"]], [add(1)])
        p0.commit(1)
        copy = pickle.loads(pickle.dumps(f))
        assert copy == f
        p1 = copy.make_state({}, 1, 2)
        p1.begin_commit(2)
        p1.multi_update([["b"]], [add(2)])
        p1.commit(2)
        assert f.make_state().multi_get([["a"], ["b"]]) == [1, 2]
        assert sorted(f.items()) == [(["a"], 1), (["b"], 2)]
        assert MemoryMapState.factory("opaque").make_state().multi_get([["a"]]) == [None]  # another factory
    finally:
        f.clear()


def test_unknown_kind_and_bad_names_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown state kind"):
        MemoryMapState.factory("exactly-once")
    with pytest.raises(ValueError, match="unknown state kind"):
        SQLiteMapState.factory(tmp_path / "x.db", "bogus")
    with pytest.raises(ValueError, match="invalid table"):
        SQLiteMapState.factory(tmp_path / "x.db", "opaque", table="t; DROP TABLE x")
    with pytest.raises(ValueError, match="invalid table"):
        PostgresMapState.factory("host=127.0.0.1", "opaque", table='a"b')
    with pytest.raises(ValueError, match="prefix"):
        RedisMapState.factory("redis://127.0.0.1", "opaque", prefix="a b")
    with pytest.raises(ValueError, match="MemoryMapState"):
        SQLiteMapState.factory(":memory:", "opaque")


# ---------------------------------------------------------------------------------------------
# Factories: picklable, lazy, no passwords


def test_factories_pickle_and_connect_lazily(tmp_path):
    # nothing listens on port 1: making the state must not connect; the first read does
    pg = PostgresMapState.factory("host=127.0.0.1 port=1 dbname=x user=y", "opaque", connect_timeout=2)
    rd = RedisMapState.factory("redis://127.0.0.1:1/0", "transactional", socket_timeout=2)
    sq = SQLiteMapState.factory(tmp_path / "lazy.db", "non-transactional")
    for f in (pg, rd, sq):
        g = pickle.loads(pickle.dumps(f))
        assert g == f and g.describe() == f.describe()
        g.make_state({}, 0, 1)
        g.meta_store({})
    assert not (tmp_path / "lazy.db").exists()
    import psycopg
    import redis

    with pytest.raises(psycopg.OperationalError):
        pg.make_state({}, 0, 1).multi_get([["a"]])
    with pytest.raises(redis.ConnectionError):
        rd.make_state({}, 0, 1).multi_get([["a"]])
    # the states themselves hold connections and do not travel
    with pytest.raises(TypeError, match="pickle the state factory"):
        pickle.dumps(sq.make_state().backing)


def test_passwords_never_shown():
    for dsn in ("host=db user=u password=s3cret dbname=d", "postgresql://u:s3cret@db:5432/d"):
        f = PostgresMapState.factory(dsn, "opaque")
        for text in (f.describe(), repr(f), repr(f.make_state().backing), repr(f.meta_store())):
            assert "s3cret" not in text and "db" in text
    r = RedisMapState.factory("redis://:s3cret@cache:6379/2", "opaque")
    for text in (r.describe(), repr(r), repr(r.make_state().backing)):
        assert "s3cret" not in text and "cache:6379" in text


def test_default_dsn_from_environment(monkeypatch):
    for var in ("SQUALL_PG_DSN", "PGHOST", "PGPORT", "PGDATABASE", "PGUSER"):
        monkeypatch.delenv(var, raising=False)
    assert default_dsn() == "host=127.0.0.1 port=5432 dbname=test user=postgres"
    monkeypatch.setenv("PGHOST", "db.example")
    monkeypatch.setenv("PGUSER", "alice")
    assert PostgresMapState.factory(None, "opaque").dsn == "host=db.example port=5432 dbname=test user=alice"
    monkeypatch.setenv("SQUALL_PG_DSN", "postgresql://bob@h/db")
    assert PostgresMapState.factory(kind="opaque").dsn == "postgresql://bob@h/db"


# ---------------------------------------------------------------------------------------------
# Real processes: a crash inside the commit transaction, and concurrent writers on one file


def _run_child(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT
    )


CRASH_IN_COMMIT = """
import base64, os, pickle, sys
f = pickle.loads(base64.b64decode(sys.argv[1]))
add = lambda n: (lambda old: n if old is None else old + n)
s, meta = f.make_state({}, 0, 1), f.meta_store({})
s.begin_commit(1); s.multi_update([["a"]], [add(1)]); meta.put("txid", b"1"); s.commit(1)
s.begin_commit(2); s.multi_update([["a"], ["d"]], [add(5), add(7)]); meta.put("txid", b"2")
cls = type(s.backing)
write_meta_rows = cls._write_meta_rows
def die_before_commit(self, cur, rows):
    write_meta_rows(self, cur, rows)   # state rows and meta rows are in the open transaction
    print("dying inside the transaction", flush=True)
    os._exit(17)
cls._write_meta_rows = die_before_commit
s.commit(2)
print("not reached")
"""


@pytest.mark.parametrize("name", ["sqlite", "postgres"])
def test_process_killed_inside_the_commit_transaction(name, tmp_path, request):
    """The process dies after the batch's state and meta rows were sent, before COMMIT: the
    store has none of them."""
    s = Store(name, tmp_path, request.getfixturevalue("pg_dsn") if name == "postgres" else None)
    try:
        f = s.make("opaque")
        proc = _run_child(CRASH_IN_COMMIT, base64.b64encode(pickle.dumps(f)).decode())
        assert proc.returncode == 17, proc.stderr
        assert "dying inside the transaction" in proc.stdout
        g = s.reopen(f)
        assert g.make_state().multi_get([["a"], ["d"]]) == [1, None]
        assert s.raw_meta(g, "txid") == b"1"
        assert g.meta_store().get("txid") == b"1"
    finally:
        s.cleanup()


CONCURRENT_WRITER = """
import base64, pickle, sys
f = pickle.loads(base64.b64decode(sys.argv[1]))
p, n, batches = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
add1 = lambda old: 1 if old is None else old + 1
s, meta = f.make_state({}, p, n), f.meta_store({})
keys = [["w", p, j] for j in range(25)]
for txid in range(1, batches + 1):
    s.begin_commit(txid)
    s.multi_update(keys, [add1] * len(keys))
    meta.put(f"done/{p}", str(txid).encode())
    s.commit(txid)
    if txid == 3:  # a replay: transactional values skip it
        s.begin_commit(txid); s.multi_update(keys, [add1] * len(keys)); s.commit(txid)
"""


def test_sqlite_partitions_in_several_processes_share_one_file(tmp_path):
    f = SQLiteMapState.factory(tmp_path / "shared.db", "transactional", busy_timeout_ms=20_000)
    n, batches = 4, 15
    blob = base64.b64encode(pickle.dumps(f)).decode()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_WRITER, blob, str(p), str(n), str(batches)],
            env=env,
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(n)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    state = f.make_state()
    got = state.multi_get([["w", p, j] for p in range(n) for j in range(25)])
    assert got == [batches] * (n * 25)
    meta = f.meta_store()
    assert [meta.get(f"done/{p}") for p in range(n)] == [str(batches).encode()] * n
    with sqlite3.connect(f.path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    state.close()
    meta.close()


def test_an_unstorable_value_names_its_key_and_what_to_do(store, kind):
    """A value JSON cannot hold (a set) fails the batch's commit with an error naming the key,
    and the batch can commit once the value is storable; nothing of the failed batch is kept."""
    s = store.make(kind).make_state({}, 0, 1)
    if store.name == "memory":  # it keeps objects as they are: any value is storable
        s.begin_commit(1)
        s.multi_update([["bad"]], [SetValue({"x"})])
        s.commit(1)
        assert s.multi_get([["bad"]]) == [{"x"}]
        return
    s.begin_commit(1)
    with pytest.raises(TypeError, match=r'key \["bad"\].*return numbers, strings, lists or dicts'):
        s.multi_update([["ok"], ["bad"]], [add(1), SetValue({"x"})])
    s.begin_commit(1)  # the retry of the same batch, now storable
    s.multi_update([["ok"], ["bad"]], [add(1), add(2)])
    s.commit(1)
    assert s.multi_get([["ok"], ["bad"]]) == [1, 2]


class SetValue:
    """A ValueUpdater whose result is a set: not JSON."""

    def __init__(self, v):
        self.v = v

    def update(self, stored):
        return self.v


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_an_older_batch_run_again_after_a_newer_commit_changes_nothing(store, kind):
    """Spark recomputing a lost task from its lineage runs the commits of old batches again,
    after newer ones committed. Txids commit in order, so a batch older than a key's stored txid
    was applied already: the stored values stay as they are."""
    s = store.make(kind).make_state({}, 0, 1)
    for txid, n in ((1, 10), (2, 5)):
        s.begin_commit(txid)
        s.multi_update([["a"]], [add(n)])
        s.commit(txid)
    s.begin_commit(1)  # batch 1 again, after batch 2 committed
    s.multi_update([["a"], ["new"]], [add(10), add(7)])
    s.commit(1)
    assert s.multi_get([["a"], ["new"]]) == [15, 7]  # "a" untouched; a key batch 2 never wrote is written
