"""The driver side of the multi-host cluster tests (tests/engines/test_netns_cluster.py): one job
per run, in its own process (the test process already holds the `local` SparkContext), in the
root namespace, with spark.driver.host on the harness's bridge address. It prints JSON lines on
stdout; the last one is the result.

Shipping, as a user would: the executors' Python is a clean venv without squall
(spark.pyspark.python); squall ships itself as a zip at the first submit (what `--py-files`
does by hand); the topology file is pickled by value, as `squall run` does, and the modules it imports its components
from (rabbitmq_wordcount's bolts come from wordcount.py) go by value too, with nothing added by hand.

    python tests/support/netns_job.py MASTER DRIVER_HOST WORKER_PYTHON SCENARIO [--opt value ...]

SCENARIO: wordcount, traffic (the word count, nothing captured: the bytes on the driver's links
and between slots), trident-pg, rabbitmq, all (those four in one application), wordcount-loss
(progress lines per wave; reads "release" on stdin, then finishes the stream with `--tail` more
sentences), wordcount-scaling (spout, split and count each `--parallelism` tasks, `--limit`
sentences per spout task; with `--cpu-groups`, the CPU each worker host's group used in the run),
or hold (no topology: a Python task on every executor core for `--hold` seconds).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

EXAMPLES = ROOT / "examples"
CLUSTER_CONF: dict[str, Any] = {}  # the shared paths of this cluster (main sets it from --shared)


def session(args: argparse.Namespace) -> Any:
    from squall.engine.spark.session import get_or_create_session

    os.environ["PYSPARK_PYTHON"] = args.worker_python
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = get_or_create_session(args.master, app_name=f"squall-netns-{args.scenario}", ui=True, extra_conf={
        "spark.driver.host": args.driver_host,
        "spark.driver.bindAddress": args.driver_host,
        "spark.ui.port": str(args.ui_port),
        "spark.pyspark.python": args.worker_python,
        "spark.executorEnv.PYSPARK_PYTHON": args.worker_python,
        "spark.executorEnv.PYTHONPATH": "",  # nothing of the driver's checkout (the disk is shared)
        "spark.executor.memory": "768m",
        "spark.task.maxFailures": "4",
    })
    return spark


def where_python_runs(sc: Any, n: int = 6) -> list[dict[str, Any]]:
    """Which interpreter the executors' Python workers run and where they import squall from."""
    def probe(_: Any) -> list[dict[str, Any]]:
        import importlib.util as u
        import socket
        import sys as s

        spec = u.find_spec("squall")
        s2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s2.connect(("10.213.0.1", 9))  # no packet is sent: only asks which local address routes there
        ip = s2.getsockname()[0]
        s2.close()
        return [{"python": s.executable, "squall": spec.origin if spec else None, "ip": ip}]
    return sc.parallelize(range(n), n).mapPartitions(probe).collect()


def failed_tasks(sc: Any) -> int:
    """Tasks Spark re-ran after a failure (an executor lost mid-task), from the driver's REST API."""
    import urllib.request

    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages"
    with urllib.request.urlopen(url, timeout=10) as r:
        return sum(s.get("numFailedTasks", 0) for s in json.load(r))


def executors(sc: Any) -> list[str]:
    infos = sc._jsc.sc().statusTracker().getExecutorInfos()
    return sorted(f"{i.host()}:{i.port()}" for i in infos)


def load(path: Path) -> Any:
    from pyspark import cloudpickle

    from squall.cli import load_topology_module

    module = load_topology_module(str(path))
    try:
        cloudpickle.register_pickle_by_value(module)
    except ValueError:
        pass
    return module


# -- scenarios ---------------------------------------------------------------------------

def refused(spark: Any) -> str:
    """What submitting a Trident topology with SQLite state to this cluster says (it must refuse)."""
    from squall import LocalCluster
    from squall.engine.spark.host_local import HostLocalResourceError
    from squall.trident import Count, FixedBatchSpout, SQLiteMapState, TridentTopology

    t = TridentTopology()
    (t.new_stream("words", FixedBatchSpout(["word"], 2, ["a"], ["b"])).group_by(["word"])  # refused at submit
     .persistent_aggregate(SQLiteMapState.factory("counts.db", "transactional"), Count(), ["count"]))
    with LocalCluster(engine="spark", spark=spark) as cluster:
        try:
            cluster.submit_topology("refused", dict(CLUSTER_CONF), t.build())
        except HostLocalResourceError as e:
            return str(e)
    return "(accepted)"


def wordcount(args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    from tests.support.spark_cluster_job import run_wordcount

    t0 = time.perf_counter()
    counts = run_wordcount(load(EXAMPLES / "wordcount.py"), args.limit, 2, args.timeout, args.wave_tuples,
                           extra_conf=CLUSTER_CONF, engine="spark", spark=spark)
    run_secs = time.perf_counter() - t0  # submit to idle: what bench/cluster.py divides by
    return {"refused": None if spark.sparkContext.master.startswith("local") else refused(spark),
            "run_secs": round(run_secs, 3), **counts}


def traffic(args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    """The bounded word count with nothing captured (a test's captured emits travel in the slots'
    reports): what the driver's links to the slots carried, against what the slots sent each other."""
    from squall import Config, LocalCluster
    from tests.support.spark_cluster_job import TOPOLOGY

    module = load(EXAMPLES / "wordcount.py")
    conf = {**module.CONF, Config.SQUALL_WAVE_MAX_TUPLES: args.wave_tuples, **CLUSTER_CONF}
    with LocalCluster(engine="spark", spark=spark) as cluster:
        cluster.submit_topology(TOPOLOGY, conf, module.build_topology(2, limit=args.limit))
        cluster.wait_idle(args.timeout)
        coord = cluster.coordinator(TOPOLOGY)
        links = coord.pool.slots  # counted since the pool started: the scenarios before this one too
        return {"acked": cluster.get_topology_stats(TOPOLOGY)["sentences"]["acked"], "waves": coord.waves_done,
                "driver_frame_bytes": sum(s.sent.frame_bytes + s.received.frame_bytes for s in links),
                "driver_wave_bytes": sum(s.sent.wave_bytes + s.received.wave_bytes for s in links),
                "peer_bytes": coord.peer_bytes()}


def scaling_topology(module: ModuleType, tasks: int, limit: int, counts_dir: str) -> Any:
    """examples/wordcount.py's word count with every component at `tasks` tasks (one of each per
    worker core), `limit` sentences per spout task, at least once through one acker. Each count
    task writes its counts to `counts_dir` (shared disk) at cleanup: nothing is captured, since a
    run's captured emits travel to the driver in the slots' reports and would load it."""
    from squall import TopologyBuilder

    class CountsToFile(module.WordCount):
        def prepare(self, conf: dict, context: Any) -> None:
            super().prepare(conf, context)
            self.task_id = context.this_task_id

        def cleanup(self) -> None:
            with open(os.path.join(counts_dir, f"count-{self.task_id}.json"), "w") as f:
                json.dump(self.counts, f)

    builder = TopologyBuilder()
    builder.set_spout("sentences", module.RandomSentenceSpout(limit=limit), parallelism=tasks)
    builder.set_bolt("split", module.SplitSentence(), parallelism=tasks).shuffle_grouping("sentences")
    builder.set_bolt("count", CountsToFile(), parallelism=tasks).fields_grouping("split", ["word"])
    return builder.create_topology()


def expected_scaling_counts(module: ModuleType, tasks: int, limit: int) -> dict[str, int]:
    """The words of the first `limit` sentences of each of `tasks` spout tasks, each generator
    seeded as RandomSentenceSpout.open seeds its task."""
    counts: Counter[str] = Counter()
    for index in range(tasks):
        spout = module.RandomSentenceSpout(limit=limit)
        spout.rng = module.random.Random(spout.seed * 1_000_003 + index)
        counts.update(w for _ in range(limit) for w in spout._sentence().split())
    return dict(counts)


def _driver_cpu() -> dict[str, float]:
    """CPU seconds so far of this driver's Python process and of its JVM (py4j's gateway, a child)."""
    from tests.support.cpu_caps import descendants, proc_cpu_secs

    return {"python": proc_cpu_secs(os.getpid()), "jvm": sum(proc_cpu_secs(p) for p in descendants(os.getpid()))}


def wordcount_scaling(args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    """The bounded word count at `--parallelism` tasks per component; its rates (as
    bench/cluster.py's `throughput`), final counts (from the count tasks' files), and the CPU the
    driver and each worker host's group (`--cpu-groups`) used over the run, submit to idle."""
    from squall import Config, LocalCluster
    from tests.support.cpu_caps import CpuCap

    example = load(EXAMPLES / "wordcount.py")
    tasks, limit = args.parallelism, args.limit
    conf = {**example.CONF, Config.TOPOLOGY_ACKER_EXECUTORS: 1, **CLUSTER_CONF}
    if args.wave_tuples:
        conf[Config.SQUALL_WAVE_MAX_TUPLES] = args.wave_tuples
    if args.slots:  # Spark's default parallelism is at least 2, more than a 1-core cluster has
        conf[Config.SQUALL_SPARK_SLOTS] = args.slots
    counts_dir = os.path.join(args.shared, f"counts-{os.getpid()}")
    os.makedirs(counts_dir)
    groups = [CpuCap(name) for name in args.cpu_groups.split(",") if name]  # the cluster's groups, read only
    cpu0, groups0, t0 = _driver_cpu(), [g.usage() for g in groups], time.perf_counter()
    with LocalCluster(engine="spark", spark=spark) as cluster:
        cluster.submit_topology("scaling", conf, scaling_topology(example, tasks, limit, counts_dir))
        cluster.wait_idle(args.timeout)
        run_secs = time.perf_counter() - t0
        cpu1, groups1 = _driver_cpu(), [g.usage() for g in groups]
        coord = cluster.coordinator("scaling")
        spout = cluster.get_topology_stats("scaling")["sentences"]
        r = {"spout_acked": spout["acked"], "spout_failed": spout["failed"], "waves": coord.waves_done,
             "lost_waves": coord.lost_waves, "errors": [str(e) for e in coord.errors],
             "peer_bytes": coord.peer_bytes()}
    counts: Counter[str] = Counter()
    deadline = time.monotonic() + 30  # the slots write them as they drop the topology
    while len(files := os.listdir(counts_dir)) < tasks and time.monotonic() < deadline:
        time.sleep(0.1)
    for name in files:
        with open(os.path.join(counts_dir, name)) as f:
            counts.update(json.load(f))
    sentences = tasks * limit
    words = sum(counts.values())
    return {**r, "counts": dict(counts), "tasks": tasks, "limit_per_spout_task": limit, "sentences": sentences,
            "run_secs": round(run_secs, 3), "sentences_per_s": round(sentences / run_secs, 1),
            "bolt_tuples_per_s": round((sentences + 2 * words) / run_secs, 1),
            "driver_cpu": {k: {"cores": round((cpu1[k] - cpu0[k]) / run_secs, 3),
                               "cpu_secs": round(cpu1[k] - cpu0[k], 3)} for k in cpu0},
            "worker_cpu": {g.name: g1.since(g0, run_secs) for g, g0, g1 in zip(groups, groups0, groups1)}}


def hold(args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    """Keeps a Python worker busy on every executor core for `--hold` seconds, without squall's
    engine: while it runs, each worker host has every kind of process it ever runs (the Worker
    JVM, an executor JVM, PySpark's daemon and a Python worker it forked), for a test to look at."""
    sc = spark.sparkContext
    n = sc.defaultParallelism
    secs = args.hold

    def busy(_: Any) -> list[int]:
        import os as o
        import time as t

        t.sleep(secs)
        return [o.getpid()]

    return {"python_workers": sorted(set(sc.parallelize(range(n), n).mapPartitions(busy).collect()))}


def _split_class() -> Any:
    from squall.trident import BaseFunction

    class Split(BaseFunction):  # defined here: pickled by value, as the topology file's own code
        def execute(self, t: Any, collector: Any) -> None:
            for w in str(t[0] or "").split():
                collector.emit([w])

    return Split


def trident_topology(data: str, dsn: str, table: str) -> Any:
    from squall.trident import Count, JsonLinesFileSpout, PostgresMapState, TridentTopology

    t = TridentTopology()
    state = (t.new_stream("words", JsonLinesFileSpout(data, ["sentence"], batch_size=200))
             .each(["sentence"], _split_class()(), ["word"]).parallelism_hint(2)
             .group_by(["word"])
             .persistent_aggregate(PostgresMapState.factory(dsn, "transactional", table=table), Count(), ["count"])
             .parallelism_hint(2))
    return t.build(), state


def run_trident(data: str, dsn: str, table: str, timeout: float, **cluster_kwargs: Any) -> dict[str, Any]:
    """The Trident word count from `data` into PostgreSQL `table` until every file is committed."""
    from squall import Config, LocalCluster

    topology, state = trident_topology(data, dsn, table)
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("tri", {Config.TOPOLOGY_MAX_SPOUT_PENDING: 2, **CLUSTER_CONF}, topology)
        spout = cluster.spout_instances("tri")[0]
        deadline = time.monotonic() + timeout
        while not spout.idle:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Trident run did not commit everything in {timeout}s")
            if cluster.get_crash("tri"):
                raise cluster.get_crash("tri")
            time.sleep(0.05)
        lost = cluster.coordinator("tri").lost_waves
    return {"table": table, "lost_waves": lost, "counts": trident_counts(data, state)}


def trident_counts(data: str, state: Any) -> dict[str, Any]:
    """The count the state holds for every word of the corpus in `data`."""
    words = sorted({w for f in sorted(Path(data).iterdir()) for line in f.read_text().splitlines()
                    for w in json.loads(line)["sentence"].split()})
    return dict(zip(words, state.multi_get([[w] for w in words])))


def trident_pg(args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    return run_trident(args.data, args.dsn, args.table, args.timeout, engine="spark", spark=spark)


def rabbit_topology() -> Any:
    return load(EXAMPLES / "rabbitmq_wordcount.py")


def run_rabbitmq(n: int, timeout: float, **cluster_kwargs: Any) -> dict[str, Any]:
    """examples/rabbitmq_wordcount.py over $SQUALL_EXAMPLE_QUEUE until `n` sentences are acked."""
    from squall import LocalCluster
    from tests.support.spark_cluster_job import final_counts

    module = rabbit_topology()
    with LocalCluster(capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("rabbit", {**module.CONF, **CLUSTER_CONF}, module.build_topology(2))
        deadline = time.monotonic() + timeout
        while cluster.get_topology_stats("rabbit")["sentences"]["acked"] < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {cluster.get_topology_stats('rabbit')['sentences']} in {timeout}s")
            time.sleep(0.05)
        cluster.wait_idle(timeout)
        coord = cluster.coordinator("rabbit")
        final, _ = final_counts(coord)
        spout = cluster.get_topology_stats("rabbit")["sentences"]
        return {"counts": dict(sorted(final.items())), "spout_acked": spout["acked"],
                "spout_failed": spout["failed"], "errors": [str(e) for e in coord.errors],
                "lost_waves": coord.lost_waves}


def rabbitmq(args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    return run_rabbitmq(args.limit, args.timeout, engine="spark", spark=spark)


def released_spout(module: ModuleType, release_path: str, tail: int) -> Any:
    """The example's spout, unbounded until `release_path` exists (it runs in a slot on a worker
    host, which sees the shared disk, not this process): then `tail` more sentences."""

    class ReleasedSpout(module.RandomSentenceSpout):
        def next_tuple(self) -> None:
            if self.limit is None and self.emitted % 100 == 0 and os.path.exists(release_path):
                self.limit = self.emitted + tail
            super().next_tuple()

    return ReleasedSpout(limit=None)


def wordcount_loss(args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    """An unbounded word count printing {"wave": n, "t": ...} as waves complete; on "release"
    (stdin) the spout stops after `tail` more sentences and the run finishes."""
    from squall import Config, LocalCluster, TopologyBuilder
    from tests.support.spark_cluster_job import TOPOLOGY, final_counts

    module = load(EXAMPLES / "wordcount.py")
    conf = dict(module.CONF)
    conf[Config.SQUALL_WAVE_MAX_TUPLES] = args.wave_tuples
    conf[Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS] = args.message_timeout
    # a slot per worker core, whenever the executors registered: every core holds one, so the
    # killed host's slots can only come back on the host that joins
    shared = {**CLUSTER_CONF, Config.SQUALL_SPARK_SLOTS: args.parallelism}
    conf.update(shared)
    release_path = os.path.join(args.shared, f"release-{os.getpid()}")
    released = threading.Event()

    def release() -> None:
        sys.stdin.readline()
        with open(release_path, "w"):
            pass
        released.set()

    threading.Thread(target=release, daemon=True).start()
    b = TopologyBuilder()
    b.set_spout("sentences", released_spout(module, release_path, args.tail))
    b.set_bolt("split", module.SplitSentence(), parallelism=args.parallelism).shuffle_grouping("sentences")
    b.set_bolt("count", module.WordCount(), parallelism=args.parallelism).fields_grouping("split", ["word"])
    with LocalCluster(capture=True, engine="spark", spark=spark) as cluster:
        tri = None
        if args.dsn:  # a Trident word count into PostgreSQL alongside, through the same loss
            tri_topology, tri = trident_topology(args.data, args.dsn, args.table)
            cluster.submit_topology("tri", {Config.TOPOLOGY_MAX_SPOUT_PENDING: 2, **shared}, tri_topology)
        cluster.submit_topology(TOPOLOGY, conf, b.create_topology())
        coord = cluster.coordinator(TOPOLOGY)
        seen, deadline, spout = 0, time.monotonic() + args.timeout, None
        while True:
            done = coord.waves_done
            if done != seen:
                seen = done
                tri_busy = tri is not None and not all(sp.idle for sp in cluster.spout_instances("tri"))
                acked = cluster.get_topology_stats(TOPOLOGY)["sentences"]["acked"]
                print(json.dumps({"wave": done, "t": time.time(), "acked": acked,
                                  "lost_waves": coord.lost_waves, "trident_running": tri_busy}), flush=True)
            if released.is_set():  # the spout runs in a slot: a copy of it, as it is now
                spout = cluster.spout_instances(TOPOLOGY)[0]
                if spout.limit is not None and spout.emitted >= spout.limit and not spout.pending \
                        and not spout.replay:
                    break
            if cluster.get_crash(TOPOLOGY):
                raise cluster.get_crash(TOPOLOGY)
            if time.monotonic() > deadline:
                raise TimeoutError(f"the loss run did not finish in {args.timeout}s (released: {released.is_set()})")
            time.sleep(0.2 if released.is_set() else 0.01)
        while tri is not None and not all(sp.idle for sp in cluster.spout_instances("tri")):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Trident run did not commit everything in {args.timeout}s")
            time.sleep(0.05)
        cluster.wait_idle(args.timeout)
        final, count_emits = final_counts(coord)
        stats = cluster.get_topology_stats(TOPOLOGY)["sentences"]
        return {"failed_tasks": failed_tasks(spark.sparkContext), "counts": dict(sorted(final.items())),
                "trident_counts": trident_counts(args.data, tri) if tri is not None else None,
                "trident_lost_waves": cluster.coordinator("tri").lost_waves if tri is not None else None,
                "count_emits": count_emits, "limit": spout.emitted,
                "spout_acked": spout.acked, "spout_failed": spout.failed, "replayed": spout.replayed,
                "given_up": spout.given_up, "stats_acked": stats["acked"], "pending": coord.pending_count,
                "lost_waves": coord.lost_waves, "waves": coord.waves_done,
                "errors": [str(e) for e in coord.errors]}


def all_scenarios(args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    """traffic and wordcount, then trident-pg (with --dsn) and rabbitmq (with --rabbit-limit) in one application:
    one driver and one set of executors to start. Each scenario's result, or its error."""
    import traceback

    out: dict[str, Any] = {}
    plan = [("traffic", traffic, args), ("wordcount", wordcount, args)]
    if args.dsn:
        plan.append(("trident-pg", trident_pg, args))
    if args.rabbit_limit:
        plan.append(("rabbitmq", rabbitmq, argparse.Namespace(**{**vars(args), "limit": args.rabbit_limit})))
    for name, fn, a in plan:
        try:
            out[name] = fn(a, spark)
        except Exception:  # noqa: BLE001 - reported to the test, which fails on it
            out[name] = {"error": traceback.format_exc()}
    return out


SCENARIOS = {"wordcount": wordcount, "traffic": traffic, "trident-pg": trident_pg, "rabbitmq": rabbitmq,
             "wordcount-loss": wordcount_loss, "wordcount-scaling": wordcount_scaling, "hold": hold,
             "all": all_scenarios}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("master")
    p.add_argument("driver_host")
    p.add_argument("worker_python")
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--ui-port", type=int, default=4040)
    p.add_argument("--limit", type=int, default=2000)
    p.add_argument("--wave-tuples", type=int, default=400)
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--message-timeout", type=int, default=30)
    p.add_argument("--tail", type=int, default=600)
    p.add_argument("--data", default="")
    p.add_argument("--dsn", default="")
    p.add_argument("--table", default="")
    p.add_argument("--hold", type=float, default=10.0, help="hold: seconds each Python task runs")
    p.add_argument("--slots", type=int, default=0, help="wordcount-scaling: resident slots (0: Spark's default)")
    p.add_argument("--cpu-groups", default="", help="wordcount-scaling: the worker hosts' CPU groups to read, a,b,...")
    p.add_argument("--rabbit-limit", type=int, default=0, help="'all': sentences on $SQUALL_EXAMPLE_QUEUE (0: skip)")
    p.add_argument("--shared", required=True, help="a directory every host sees (here: the same disk)")
    args = p.parse_args(argv)
    # What a topology that runs on local[2] needs changed on a cluster: the master URL and this, nothing else
    CLUSTER_CONF.update({"squall.checkpoint.dir": os.path.join(args.shared, "checkpoints")})

    t0 = time.monotonic()
    spark = session(args)
    sc = spark.sparkContext
    try:
        result = SCENARIOS[args.scenario](args, spark)
        probe = where_python_runs(sc)  # after a topology: squall shipped itself to the executors
        result.update({"master": sc.master, "app_id": sc.applicationId, "executors": executors(sc),
                       "probe": probe, "secs": round(time.monotonic() - t0, 1)})
    finally:
        spark.stop()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    assert importlib.util.find_spec("pyspark"), "run with the project's venv"
    sys.exit(main())
