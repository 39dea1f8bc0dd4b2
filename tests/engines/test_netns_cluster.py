"""squall on a multi-host Spark standalone cluster (issue 14): a master in the root network
namespace and 3 workers each in its own namespace (tests/support/netns_cluster.py), the driver in
the root namespace on the bridge address, the executors' Python a clean venv without squall,
squall shipped as `--py-files` (tests/support/netns_job.py).

One cluster for the module. The word count, the Trident word count into PostgreSQL and the
RabbitMQ-fed topology run in one application (one driver to start, `all` in netns_job.py), each
checked by its own test against the local engine; the worker-loss test runs last since it kills a
worker and adds one.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import zlib
from collections import Counter

import pytest

from tests.support.netns_cluster import NetnsCluster, unavailable_reason
from tests.support.netns_runs import run_job, worker_loss

pytestmark = [pytest.mark.slow, pytest.mark.spark]

CI = os.environ.get("CI") == "true"
WORDCOUNT_LIMIT = 1500
RABBIT_SENTENCES = 800
MESSAGE_TIMEOUT = 30
PG_LOCAL = "host=127.0.0.1 dbname=test user=postgres"
AMQP = "amqp://guest:guest@127.0.0.1:5672/%2F"


def _skip_or_fail(reason: str) -> None:
    if CI:
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def netns(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        _skip_or_fail(f"the multi-host cluster cannot run: {reason}")
    from tests.support.worker_venv import worker_python

    with NetnsCluster(tmp_path_factory.mktemp("netns"), workers=3, worker_python=worker_python()) as cluster:
        yield cluster


def _pg_reason() -> str | None:
    try:
        import psycopg

        psycopg.connect(PG_LOCAL, connect_timeout=3).close()
    except Exception as e:  # noqa: BLE001 - any reason means "no PostgreSQL here"
        return f"PostgreSQL at 127.0.0.1:5432 is not reachable: {e}"
    return None


def _publish(queue_name: str, sentences: list[str]) -> None:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(AMQP))
    ch = conn.channel()
    ch.queue_delete(queue_name)
    ch.queue_declare(queue_name, durable=True)
    for s in sentences:
        ch.basic_publish("", queue_name, s.encode())
    conn.close()


def _rabbit_reason() -> str | None:
    try:
        _publish(f"netns-probe-{os.getpid()}", [])
    except Exception as e:  # noqa: BLE001
        return f"RabbitMQ at 127.0.0.1:5672 is not reachable: {e}"
    return None


def _sentences() -> list[str]:
    rng = random.Random(zlib.crc32(b"netns-rabbit"))
    words = "alpha beta gamma delta storm spark wave tuple".split()
    return [" ".join(rng.choices(words, k=rng.randint(3, 9))) for _ in range(RABBIT_SENTENCES)]


@pytest.fixture(scope="module")
def on_cluster(netns, tmp_path_factory):
    """The three scenarios in one application on the cluster; PostgreSQL and RabbitMQ through
    forwarders on the bridge (the executors write the state, and the RabbitMQ spout runs on them)."""
    from tests.support.broker_proxy import TcpProxy
    from tests.support.trident_helpers import write_corpus

    tmp = tmp_path_factory.mktemp("scenarios")
    run = f"{zlib.crc32(str(tmp).encode()):08x}"
    opts = ["--limit", str(WORDCOUNT_LIMIT), "--wave-tuples", "400"]
    env, proxy, rabbit_proxy, truth = {}, None, None, None
    reasons = {"pg": _pg_reason(), "rabbit": _rabbit_reason()}
    if reasons["pg"] is None:
        truth = write_corpus(str(tmp / "corpus"), 2, 250)
        proxy = TcpProxy("127.0.0.1", 5432, bind=netns.bridge_ip)
        opts += ["--data", str(tmp / "corpus"), "--table", f"netns_tri_{run}",
                 "--dsn", f"host={netns.bridge_ip} port={proxy.port} dbname=test user=postgres"]
    if reasons["rabbit"] is None:
        env["SQUALL_EXAMPLE_QUEUE"] = f"netns-{run}-cluster"
        _publish(env["SQUALL_EXAMPLE_QUEUE"], _sentences())
        rabbit_proxy = TcpProxy("127.0.0.1", 5672, bind=netns.bridge_ip)
        env["AMQP_URL"] = f"amqp://guest:guest@{netns.bridge_ip}:{rabbit_proxy.port}/%2F"
        opts += ["--rabbit-limit", str(RABBIT_SENTENCES)]
    try:
        results = run_job(netns, "all", *opts, env=env)
    finally:
        for p in (proxy, rabbit_proxy):
            if p is not None:
                p.close()
    print("on the cluster:", {k: {kk: vv for kk, vv in v.items() if kk not in ("counts", "probe")}
                              if isinstance(v, dict) else v for k, v in results.items()})
    return {"results": results, "reasons": reasons, "truth": truth, "tmp": tmp, "run": run,
            "proxy_peers": list(proxy.peers) if proxy else [],
            "rabbit_peers": list(rabbit_proxy.peers) if rabbit_proxy else []}


def _result(on_cluster: dict, name: str) -> dict:
    r = on_cluster["results"][name]
    assert "error" not in r, r.get("error")
    return r


def test_wordcount_matches_local_engine_from_a_clean_worker_python(netns, on_cluster):
    from tests.support.spark_cluster_job import expected_counts, load_example, run_wordcount

    r = _result(on_cluster, "wordcount")
    results = on_cluster["results"]
    # It ran on the worker namespaces, in the clean venv, with squall from the shipped zip.
    worker_ips = {w.ip for w in netns.workers}
    assert results["master"] == netns.master_url
    assert {e.rsplit(":", 1)[0] for e in results["executors"]} == worker_ips | {netns.bridge_ip}
    assert {p["ip"] for p in results["probe"]} <= worker_ips
    for p in results["probe"]:
        assert p["python"] == netns.worker_python and p["squall"].startswith("./squall.zip/"), p
    clean_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the Spark session sets one here
    assert subprocess.run([netns.worker_python, "-c", "import squall"], capture_output=True, cwd="/",
                          env=clean_env).returncode, "the worker venv must not have squall"
    # Host-local state is refused at submit, naming the bolt and the shared alternatives.
    assert r["refused"].startswith(f"refusing to submit to the Spark cluster {netns.master_url}"), r["refused"]
    assert "words-state0.spec.factory (SQLiteStateFactory" in r["refused"] and "PostgreSQL or Redis" in r["refused"]

    module = load_example()
    expected = expected_counts(module, WORDCOUNT_LIMIT)
    local = run_wordcount(module, WORDCOUNT_LIMIT, wave_tuples=400, engine="local")
    assert local["counts"] == expected
    assert r["counts"] == expected
    assert r["spout_emitted"] == r["spout_acked"] == WORDCOUNT_LIMIT
    assert r["spout_failed"] == 0 and r["pending"] == 0 and r["errors"] == []
    assert r["count_emits"] == r["split_emits"] == sum(expected.values())


def test_tuples_go_from_worker_to_worker_not_through_the_driver(on_cluster):
    """The slots on the worker hosts send each other the tuples: by bytes counted, the driver's
    sockets carried no pickled batch either way, and, the topology shipped to the slots left out,
    far fewer bytes than the slots' own links."""
    r = _result(on_cluster, "traffic")
    assert r["acked"] == WORDCOUNT_LIMIT
    assert r["driver_frame_bytes"] == 0
    assert r["peer_bytes"] > 100_000, r["peer_bytes"]
    assert r["driver_wave_bytes"] * 3 < r["peer_bytes"], (r["driver_wave_bytes"], r["peer_bytes"])


def test_trident_wordcount_into_postgres_matches_local_engine(netns, on_cluster):
    if on_cluster["reasons"]["pg"]:
        _skip_or_fail(on_cluster["reasons"]["pg"])
    from tests.support.netns_job import run_trident

    r = _result(on_cluster, "trident-pg")
    truth = dict(on_cluster["truth"])
    local = run_trident(str(on_cluster["tmp"] / "corpus"), PG_LOCAL, f"netns_tri_local_{on_cluster['run']}", 120,
                        engine="local")
    assert r["counts"] == truth
    assert local["counts"] == truth
    # The state was written from the executors in the worker namespaces, through the forwarder.
    assert set(on_cluster["proxy_peers"]) & {w.ip for w in netns.workers}, on_cluster["proxy_peers"]


def test_rabbitmq_fed_topology_matches_local_engine(netns, on_cluster):
    if on_cluster["reasons"]["rabbit"]:
        _skip_or_fail(on_cluster["reasons"]["rabbit"])
    from tests.support.netns_job import run_rabbitmq

    r = _result(on_cluster, "rabbitmq")
    sentences = _sentences()
    truth = dict(sorted(Counter(w for s in sentences for w in s.split()).items()))
    queue_local = f"netns-{on_cluster['run']}-local"
    _publish(queue_local, sentences)
    os.environ["SQUALL_EXAMPLE_QUEUE"] = queue_local
    try:
        local = run_rabbitmq(len(sentences), 120, engine="local")
    finally:
        os.environ.pop("SQUALL_EXAMPLE_QUEUE", None)
    assert r["errors"] == [] and local["errors"] == []
    assert r["spout_acked"] == local["spout_acked"] == len(sentences)
    assert r["counts"] == local["counts"] == truth
    # The spout consumed from a worker namespace, through the forwarder.
    assert set(on_cluster["rabbit_peers"]) & {w.ip for w in netns.workers}, on_cluster["rabbit_peers"]


@pytest.fixture(scope="module")
def loss_run(netns, tmp_path_factory):
    """SIGKILL a worker host's JVMs and Python workers after 4 waves of the word count (once the
    driver shows a task running there), with a Trident word count into PostgreSQL running
    alongside; a new host joins. The job's result, and the Trident truth (None without PostgreSQL)."""
    from tests.support.broker_proxy import TcpProxy
    from tests.support.trident_helpers import write_corpus

    tmp = tmp_path_factory.mktemp("loss")
    opts, truth, proxy = [], None, None
    if _pg_reason() is None:  # without PostgreSQL (and not CI), the word count alone
        truth = write_corpus(str(tmp / "corpus"), 6, 250)
        proxy = TcpProxy("127.0.0.1", 5432, bind=netns.bridge_ip)
        opts = ["--data", str(tmp / "corpus"), "--table", f"netns_loss_{zlib.crc32(str(tmp).encode()):08x}",
                "--dsn", f"host={netns.bridge_ip} port={proxy.port} dbname=test user=postgres"]
    try:
        r = worker_loss(netns, *opts, kill_after_waves=4, message_timeout=MESSAGE_TIMEOUT)
    finally:
        if proxy is not None:
            proxy.close()
    print("worker loss:", json.dumps({k: r[k] for k in (
        "killed_at_wave", "stall_secs", "replayed", "spout_failed", "lost_waves", "failed_tasks",
        "trident_lost_waves", "trident_running_at_kill", "victim_tasks_at_kill", "new_worker_tasks", "limit",
        "waves")}))
    return r, truth


def test_worker_loss_mid_stream_loses_nothing(loss_run):
    """At least once through the loss: every sentence acked, nothing given up, every word count
    exact (bolt state carried across), the new host ran tasks, the stall measured."""
    from tests.support.spark_cluster_job import expected_counts, load_example

    r, _ = loss_run
    assert r["killed_pids"], "the victim's namespace had no processes to kill"
    assert r["given_up"] == 0 and r["pending"] == 0  # nothing lost
    assert r["spout_acked"] == r["limit"]  # every sentence acked in the end
    assert r["counts"] == expected_counts(load_example(), r["limit"])
    assert r["new_worker_tasks"] > 0
    assert r["stall_secs"] > 0  # measured; its goal (<= 5 s) is bench/cluster.py's


def test_trident_counts_exact_through_worker_loss(loss_run):
    """Exactly once through the loss: Spark recomputes a lost state task from its lineage, which
    runs old batches' commits again; the maps leave keys written by a newer txid as they are."""
    r, truth = loss_run
    if truth is None:
        _skip_or_fail(_pg_reason() or "no PostgreSQL")
    assert r["trident_counts"] == dict(truth)
