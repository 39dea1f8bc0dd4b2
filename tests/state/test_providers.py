"""The state providers' checkpoint semantics (Storm's prepare/commit/rollback), each against
the real store, and a stateful topology on each: restart under the same name and provider
config gets the last committed state."""

from __future__ import annotations

import multiprocessing
import uuid

import pytest

from squall import Config, LocalCluster
from squall.state.config import make_provider
from squall.state.kv import KeyValueState
from squall.state.providers import SqliteProvider
from tests.support.broker_services import REDIS_URL, need_postgres, need_redis
from tests.support.state_topology import PlainCount, build, true_counts

PROVIDERS = ["sqlite", "memory", "postgres", "redis"]


def provider_conf(kind: str, tmp_path) -> dict:
    conf = {Config.TOPOLOGY_STATE_PROVIDER: kind}
    if kind == "sqlite":
        conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"path": str(tmp_path / "state.sqlite")}
    elif kind == "postgres":
        conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"dsn": need_postgres()}
    elif kind == "redis":
        need_redis()
        conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG] = {"url": REDIS_URL}
    return conf


def drop(kind: str, conf: dict, prefix: str) -> None:
    """Remove what a test wrote to a shared store (postgres, redis) under its unique prefix."""
    if kind == "postgres":
        import psycopg  # noqa: PLC0415

        with psycopg.connect(conf[Config.TOPOLOGY_STATE_PROVIDER_CONFIG]["dsn"]) as c:
            for table in ("squall_state", "squall_state_txid", "squall_state_prepared"):
                c.execute(f"DELETE FROM {table} WHERE ns LIKE %s", (prefix + "%",))
    elif kind == "redis":
        import redis  # noqa: PLC0415

        r = redis.Redis.from_url(REDIS_URL)
        keys = list(r.scan_iter(f"squall:state:{prefix}*"))
        if keys:
            r.delete(*keys)
        r.close()


def _state(conf: dict, ns: str) -> KeyValueState:
    s = KeyValueState(make_provider("count", conf), ns, "count")
    s.init()
    return s


@pytest.mark.parametrize("kind", PROVIDERS)
def test_prepare_commit_rollback(kind, tmp_path):
    conf = provider_conf(kind, tmp_path)
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    try:
        _prepare_commit_rollback(conf, f"{prefix}/count/0")
    finally:
        drop(kind, conf, prefix)


def _prepare_commit_rollback(conf: dict, ns: str) -> None:
    s = _state(conf, ns)
    assert list(s.items()) == [] and s.txid == 0
    s.put("a", 1)
    s.put(("b", 2), [1, 2])
    s.prepare_commit(1)
    s.commit(1)
    s.put("a", 5)
    s.delete(("b", 2))
    s.prepare_commit(2)  # prepared, never committed: a crash here
    again = _state(conf, ns)  # a restart drops what was prepared and sees the last commit
    assert dict(again.items()) == {"a": 1, ("b", 2): [1, 2]} and again.txid == 1
    s.rollback()
    assert dict(s.items()) == {"a": 1, ("b", 2): [1, 2]}
    s.delete("a")
    s.put("c", {"x": 1})
    s.prepare_commit(2)
    s.commit(2)
    assert dict(_state(conf, ns).items()) == {("b", 2): [1, 2], "c": {"x": 1}}
    assert _state(conf, ns).txid == 2
    # an old checkpoint run again (Spark recomputing a lost task from its lineage): no effect
    old = KeyValueState(make_provider("count", conf), ns, "count")
    old.loaded, old.txid = True, 0
    old.put("c", "older")
    old.prepare_commit(1)
    old.commit(1)
    after = _state(conf, ns)
    assert dict(after.items()) == {("b", 2): [1, 2], "c": {"x": 1}} and after.txid == 2


def test_providers_survive_pickling_without_their_connection(tmp_path):
    import pickle  # noqa: PLC0415

    conf = provider_conf("sqlite", tmp_path)
    s = _state(conf, "p/count/0")
    s.put("k", 1)
    s.put("gone", 2)
    s.prepare_commit(1)
    s.commit(1)
    s.delete("gone")
    copy = pickle.loads(pickle.dumps(s))  # what the Spark engine does between waves
    assert copy.provider._c is None
    copy.put("k", 3)
    copy.prepare_commit(2)
    copy.commit(2)
    assert dict(_state(conf, "p/count/0").items()) == {"k": 3}


@pytest.mark.parametrize("kind", ["memory", "postgres", "redis"])
def test_stateful_topology_on_provider(kind, tmp_path):
    conf = Config(provider_conf(kind, tmp_path))
    name = f"wc-{kind}-{uuid.uuid4().hex[:8]}"
    try:
        got = _run_twice(conf, name)
    finally:
        drop(kind, conf, name)
    assert got == dict(true_counts(60) + true_counts(40, "more"))


def _run_twice(conf: Config, name: str) -> dict:
    with LocalCluster(engine="local", simulated_time=True, stepped=True) as cluster:
        cluster.submit_topology(name, conf, build(60, counter=PlainCount).create_topology())
        cluster.advance_time(1.0)
        assert len(cluster.spout_instances(name, "sentences")[0].acked) == 60
        cluster.kill_topology(name)
        cluster.submit_topology(name, conf, build(40, counter=PlainCount, seed="more").create_topology())
        cluster.advance_time(1.0)
        bolts = []  # the committed state the restart began with, read back through a fresh state
        for task in range(2):
            bolts.append(dict(_state(conf, f"{name}/count/{task}").items()))
        cluster.kill_topology(name)
    return {k[1]: v for b in bolts for k, v in b.items()}


def _open_at_once(path, barrier, results):
    try:
        barrier.wait()
        SqliteProvider({"path": path}).load("ns")
        results.put(None)
    except Exception as e:  # noqa: BLE001 - what the test reports
        results.put(f"{type(e).__name__}: {e}")


def test_tasks_opening_a_new_sqlite_store_at_once_all_get_it(tmp_path):
    """Two tasks of a stateful bolt open the same new store at the same moment (Spark runs them
    in parallel). Switching it to WAL takes the whole file and SQLite does not wait for that, so
    one of them used to fail with "database is locked" (here about 1 open in 30)."""
    ctx = multiprocessing.get_context("fork")
    errors = []
    for i in range(40):
        barrier, results = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_open_at_once, args=(str(tmp_path / f"s{i}.sqlite"), barrier, results))
                 for _ in range(4)]
        for p in procs:
            p.start()
        errors += [r for r in (results.get(timeout=120) for _ in procs) if r is not None]
        for p in procs:
            p.join(timeout=120)
    assert errors == []
