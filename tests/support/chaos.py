"""The seeded chaos harness (bench/chaos.py, tests/engines/test_chaos.py): three topologies run at
once on the Spark engine's slots while the harness SIGKILLs slot processes at points of work done
chosen by the seed, then checks every result against an oracle.

- **core** (at-least-once): Redis Streams -> a bolt that adds each payload to a Redis set; a few
  poison payloads always fail. Oracle: every good payload is in the set (none lost), every poison
  one is in the dead-letter stream and not in the set.
- **stateful** (exactly-once by its state): numbered sentences from a durable spout -> split ->
  a stateful bolt that counts words and records each (sentence, position) it counted in the same
  state (tests/support/state_topology.py). Oracle: every sentence acked, the committed counts
  exact: a count below the truth is an update the state lost (`state_lost`).
- **trident** (exactly-once): JSON-lines files -> split -> a transactional PostgreSQL word count.
  Oracle: the stored counts exact.

`run_once` kills slots of topologies it runs itself; `run_with_driver_kills` runs them in a driver
process of their own (tests/support/chaos_job.py), which kills its own slots, and SIGKILLs that
process too, starting it again from the same conf each time.

A run prints nothing itself; `run_once` returns its figures. A seed replays a run exactly as far
as the harness decides (the kill points and which slot dies); where Spark places work is its own.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from squall import Bolt, Config, LocalCluster, TopologyBuilder
from squall.connectors.redis.streams import RedisStreamSpout
from squall.trident import Count, JsonLinesFileSpout, PostgresMapState, TridentTopology
from squall.trident.state.postgres import default_dsn
from tests.support.broker_proxy import TcpProxy
from tests.support.netns_cluster import NetnsCluster
from tests.support.state_topology import acked_ids, build, committed, true_counts
from tests.support.trident_helpers import Split, write_corpus

RESTART_SECS = 120  # a killed slot must be back within this
RUN_GUARD_SECS = 600  # a run that has not finished by then has lost something (or hangs): it fails
# Polls (or progress lines) in a row that find all work done before a fault the work outran is
# executed, and before a run ends: the topologies have recovered from the fault before.
QUIET_POLLS = 40


@dataclass
class Sizes:
    core: int = 10000
    poison: int = 12
    sentences: int = 1500
    files: int = 40
    lines: int = 100  # per file; batches of 20 lines


@dataclass
class RunResult:
    seed: int
    kills: int = 0
    driver_kills: int = 0  # of `kills`: the driver process SIGKILLed and started again
    host_kills: int = 0  # of `kills`: a namespace cluster's worker host SIGKILLed (and a new one started)
    cuts: int = 0  # times every Redis and PostgreSQL connection of the topologies was cut at once
    connections_cut: int = 0
    lost: int = 0
    duplicated_exactly_once: int = 0
    state_lost: int = 0
    rollbacks: int = 0  # recoveries the three topologies went through (a kill between waves may need none)
    secs: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.lost or self.duplicated_exactly_once or self.state_lost or self.problems)


class RecordSeen(Bolt):
    """Adds each payload to the Redis set `key` (SADD: a replay adds nothing); fails poison ones."""

    def __init__(self, url: str, key: str):
        self.url, self.key = url, key
        self.r = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "r": None}  # a connection is opened where the bolt runs

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector

    def declare_output_fields(self, declarer: Any) -> None:
        pass

    def execute(self, t: Any) -> None:
        payload = t[0]
        if payload.startswith("poison"):
            self.collector.fail(t)
            return
        if self.r is None:
            import redis  # noqa: PLC0415 - the connectors extra

            self.r = redis.Redis.from_url(self.url)
        self.r.sadd(self.key, payload)
        self.collector.ack(t)


class Chaos:
    """One run's three topologies, their data and their oracles."""

    def __init__(self, seed: int, redis_url: str, sizes: Sizes, work: str, tag: str | None = None):
        import redis  # noqa: PLC0415

        self.seed, self.sizes, self.work = seed, sizes, work
        self.redis_url = redis_url
        self.via_redis, self.via_dsn = redis_url, None  # what the topologies connect to (`cut_through`)
        self.r = redis.Redis.from_url(redis_url, decode_responses=True)
        self.tag = tag or f"{seed}_{os.getpid()}"  # names this run's stream and table (a driver process gets it)
        self.stream = f"squall-chaos-{self.tag}"
        self.seen = f"{self.stream}:seen"
        self.dead = f"{self.stream}:dlq"  # the spout's dead-letter stream
        self.group = "chaos"
        # what the run leaves in Redis: its stream, the oracle's set, the spout's dead letters and failures
        self.keys = (self.stream, self.seen, self.dead, f"{self.stream}:{self.group}:failures")
        self.table = f"chaos_{self.tag}"
        self.state_db = os.path.join(work, "state.sqlite")
        self.ack_db = os.path.join(work, "acks.sqlite")
        self.corpus = os.path.join(work, "corpus")
        self.good = [f"m{i}" for i in range(sizes.core)]
        self.poison = [f"poison{i}" for i in range(sizes.poison)]
        self.truth = write_corpus(self.corpus, sizes.files, sizes.lines, seed=seed)
        self.batches = (sizes.files * sizes.lines + 19) // 20

    def cut_through(self, bind: str = "127.0.0.1") -> list[TcpProxy]:
        """Put a proxy between the topologies and Redis, and one between them and PostgreSQL (the
        oracles read directly), so that a fault can cut every connection at once. `bind`: the
        address the topologies reach them on (a namespace cluster's bridge)."""
        r = urlparse(self.redis_url)
        redis_proxy = TcpProxy(r.hostname or "127.0.0.1", r.port or 6379, bind=bind)
        self.via_redis = r._replace(netloc=f"{bind}:{redis_proxy.port}").geturl()
        dsn = conninfo_to_dict(default_dsn())
        pg_proxy = TcpProxy(dsn.get("host") or "127.0.0.1", int(dsn.get("port") or 5432), bind=bind)
        self.via_dsn = make_conninfo(**{**dsn, "host": bind, "port": str(pg_proxy.port)})
        return [redis_proxy, pg_proxy]

    def prepare(self) -> None:
        self.r.delete(*self.keys)
        rng = random.Random(self.seed)
        entries = self.good + self.poison
        rng.shuffle(entries)
        pipe = self.r.pipeline()
        for p in entries:
            pipe.xadd(self.stream, {"payload": p})
        pipe.execute()

    def submit(self, cluster: LocalCluster, extra_conf: dict | None = None) -> None:
        """The three topologies; `extra_conf` goes into each one's conf (a cluster's shared paths)."""
        extra = extra_conf or {}
        b = TopologyBuilder()
        b.set_spout("messages", RedisStreamSpout(self.stream, self.group, self.via_redis, max_retries=2,
                                                 retry_delay_secs=0.1, claim_idle_secs=2.0, claim_interval_secs=0.5))
        b.set_bolt("record", RecordSeen(self.via_redis, self.seen), 2).shuffle_grouping("messages")
        cluster.submit_topology("core", {Config.TOPOLOGY_MAX_SPOUT_PENDING: 200, **extra}, b.create_topology())
        stateful = build(self.sizes.sentences, ack_db=self.ack_db, seed=f"chaos{self.seed}")
        cluster.submit_topology("stateful", {Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": self.state_db},
                                             Config.TOPOLOGY_MAX_SPOUT_PENDING: 100, **extra},
                                stateful.create_topology())
        t = TridentTopology()
        (t.new_stream("lines", JsonLinesFileSpout(self.corpus, ["sentence"], batch_size=20))
         .each(["sentence"], Split(), ["word"]).parallelism_hint(2)
         .group_by(["word"]).persistent_aggregate(PostgresMapState.factory(self.via_dsn, "transactional",
                                                                            table=self.table),
                                                  Count(), ["count"]).parallelism_hint(2))
        cluster.submit_topology("trident", dict(extra), t.build())

    def progress(self, cluster: LocalCluster) -> tuple[int, bool]:
        """Work done (payloads seen + sentences acked + batches committed), and whether all is."""
        seen = self.r.scard(self.seen)
        acked = len(acked_ids(self.ack_db))
        (coordinator,) = cluster.spout_instances("trident")
        dead = self.r.xlen(self.dead)
        done = seen >= len(self.good) and dead >= len(self.poison) and acked >= self.sizes.sentences \
            and coordinator.idle
        return seen + acked + coordinator.committed, done

    @property
    def total(self) -> int:
        return len(self.good) + self.sizes.sentences + self.batches

    def check(self, cluster: LocalCluster | None, result: RunResult) -> None:
        seen = set(self.r.smembers(self.seen))
        letters = [fields for _, fields in self.r.xrange(self.dead)]
        dead = [fields.get("payload") for fields in letters]
        result.lost += len(set(self.good) - seen)
        if sorted(set(dead)) != sorted(self.poison) or seen & set(self.poison):
            why = Counter((f.get("squall-reason"), f.get("squall-attempts")) for f in letters
                          if f.get("payload") not in self.poison)
            result.problems.append(f"dead letters {sorted(set(dead))[:5]}... are not the {len(self.poison)} poison "
                                   f"(the others' reason and attempts: {dict(why)})")
        counts, _ = committed(self.state_db)
        want = true_counts(self.sizes.sentences, f"chaos{self.seed}")
        result.state_lost += sum((want - counts).values())  # an update the stateful bolt's state lost
        result.duplicated_exactly_once += sum((counts - want).values())
        if len(acked_ids(self.ack_db)) != self.sizes.sentences:
            result.lost += self.sizes.sentences - len(acked_ids(self.ack_db))
        state = PostgresMapState.factory(None, "transactional", table=self.table).make_state({}, 0, 1)
        try:
            words = sorted(self.truth)
            stored = Counter({w: c or 0 for w, c in zip(words, state.multi_get([[w] for w in words]), strict=True)})
        finally:
            state.close()
        result.lost += sum((self.truth - stored).values())
        result.duplicated_exactly_once += sum((stored - self.truth).values())
        for name in ("core", "stateful", "trident") if cluster is not None else ():
            result.rollbacks += cluster.coordinator(name).rollbacks

    def cleanup(self) -> None:
        self.r.delete(*self.keys)
        self.r.close()
        PostgresMapState.factory(None, "transactional", table=self.table).drop()


def kill_a_slot(cluster: LocalCluster, rng: random.Random) -> None:
    """SIGKILL one live slot's process (a Python worker of this run's own SparkContext, by the pid
    it reported) and wait until the slot is back."""
    slots = [s for s in cluster.coordinator("core").pool.slots if s.alive and s.pid]
    slot = rng.choice(slots)
    incarnation = slot.incarnation
    os.kill(slot.pid, signal.SIGKILL)
    if not slot.wait_attached(incarnation, RESTART_SECS):
        raise RuntimeError(f"slot {slot.index} did not come back within {RESTART_SECS} s")


def cut(proxies: list[TcpProxy], result: RunResult) -> None:
    """Cut every connection through the proxies (new ones are let through, as after a network blip)."""
    result.cuts += 1
    result.connections_cut += sum(p.drop() for p in proxies)


def run_once(spark: Any, seed: int, kills: int, redis_url: str, sizes: Sizes | None = None,
             cuts: int = 0) -> RunResult:
    """One seeded run: the three topologies, `kills` slot kills and `cuts` cuts of every Redis and
    PostgreSQL connection, at work-done points drawn from the seed (within the first 70% of the
    work, with some work done between two faults), then the oracles. Points the work outran (it
    finished first) are executed on the finished topologies, each once they have settled."""
    sizes = sizes or Sizes()
    rng = random.Random(zlib.crc32(f"chaos/{seed}".encode()))
    result = RunResult(seed)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="squall-chaos-") as work:
        chaos = Chaos(seed, redis_url, sizes, work)
        faults = ["kill"] * kills + ["cut"] * cuts
        rng.shuffle(faults)
        points = sorted(rng.sample(range(1, int(chaos.total * 0.7)), kills + cuts))
        proxies = chaos.cut_through() if cuts else []
        chaos.prepare()
        try:
            with LocalCluster(engine="spark", spark=spark) as cluster:
                chaos.submit(cluster)
                last, quiet = -1, 0
                while points or quiet < QUIET_POLLS:
                    if time.monotonic() - t0 > RUN_GUARD_SECS:
                        result.problems.append(f"not finished within {RUN_GUARD_SECS} s")
                        break
                    work_done, done = chaos.progress(cluster)
                    quiet = quiet + 1 if done else 0
                    if points and (work_done >= points[0] and work_done > last  # some work between faults
                                   or quiet >= QUIET_POLLS):
                        points.pop(0)
                        if faults.pop(0) == "kill":
                            kill_a_slot(cluster, rng)
                            result.kills += 1
                        else:
                            cut(proxies, result)
                        last, quiet = work_done, 0
                        continue
                    time.sleep(0.02)
                if points:
                    result.problems.append(f"{len(points)} fault points were never reached")
                chaos.check(cluster, result)
        finally:
            chaos.cleanup()
            for p in proxies:
                p.close()
    result.secs = time.monotonic() - t0
    return result


JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chaos_job.py")


def run_with_driver_kills(seed: int, slot_kills: int, driver_kills: int, redis_url: str,
                          sizes: Sizes | None = None, cuts: int = 0, hosts: NetnsCluster | None = None,
                          host_kills: int = 0) -> RunResult:
    """One seeded run in a driver process of its own: `slot_kills` slot kills (done by the job),
    `driver_kills` SIGKILLs of the whole driver process group (then a new one from the same conf)
    and `cuts` cuts of every Redis and PostgreSQL connection, at work-done points drawn from the
    seed; then the oracles. With `hosts` (a running namespace cluster) the job runs on it, and
    `host_kills` SIGKILLs of a worker host (each followed by a new host joining) are among the
    faults. Points the work outran are executed on the finished topologies, as in `run_once`."""
    sizes = sizes or Sizes()
    rng = random.Random(zlib.crc32(f"chaos-driver/{seed}".encode()))
    result = RunResult(seed)
    t0 = time.monotonic()
    shared = None
    if hosts is not None:
        shared = hosts.tmp / "shared"
        shared.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="squall-chaos-", dir=shared) as work:
        chaos = Chaos(seed, redis_url, sizes, work)
        span = range(1, int(chaos.total * 0.7))
        slot_points = sorted(rng.sample(span, slot_kills))
        driver_points = sorted(rng.sample(span, driver_kills))
        cut_points = sorted(rng.sample(span, cuts))
        bind = hosts.bridge_ip if hosts is not None else "127.0.0.1"  # a namespace reaches the root one there
        faults = _Faults(slot_points, driver_points, cut_points, chaos.cut_through(bind) if cuts or hosts else [],
                         sorted(rng.sample(span, host_kills)), hosts, rng)
        chaos.prepare()
        try:
            for start in range(driver_kills + 1):
                job = _start_job(seed, work, chaos, slot_points, start, hosts)
                if _watch(job, faults, result, t0, os.path.join(work, f"job{start}.err")):
                    break
            if faults.left:
                result.problems.append(f"{faults.left} fault points were never reached (slot {faults.slot}, driver "
                                       f"{faults.driver}, cut {faults.cut}, host {faults.host}; the last work done "
                                       f"{faults.last})")
            chaos.check(None, result)
        finally:
            chaos.cleanup()
            for p in faults.proxies:
                p.close()
            if result.failed:
                result.problems.append(f"the driver processes' logs: {keep_logs(work, seed)}")
    result.secs = time.monotonic() - t0
    return result


def keep_logs(work: str, seed: int) -> str:
    """A failed run's driver logs, copied out of its work directory (which goes); where they are."""
    keep = tempfile.mkdtemp(prefix=f"squall-chaos-failed-{seed}-")
    for name in os.listdir(work):
        if name.endswith(".err"):
            shutil.copy(os.path.join(work, name), keep)
    return keep


@dataclass
class _Faults:
    """The work-done points still ahead of a run in driver processes, the proxies to cut, and the
    namespace cluster whose hosts die."""

    slot: list[int]
    driver: list[int]
    cut: list[int]
    proxies: list[TcpProxy]
    host: list[int] = field(default_factory=list)
    hosts: NetnsCluster | None = None
    rng: random.Random | None = None
    last: int = 0  # the work done the newest progress line said

    @property
    def left(self) -> int:
        return len(self.slot) + len(self.driver) + len(self.cut) + len(self.host)

    def kill_a_host(self, result: RunResult) -> None:
        """SIGKILL a live worker host drawn from the seed, and start a new one (a host joining)."""
        live = [w for w in self.hosts.workers if w.proc is not None and w.proc.poll() is None]
        self.hosts.kill_worker(self.rng.choice(live))
        self.hosts.add_worker(wait=False)
        result.kills += 1
        result.host_kills += 1


def _start_job(seed: int, work: str, chaos: Chaos, slot_points: list[int], start: int,
               hosts: NetnsCluster | None = None) -> subprocess.Popen:
    root = os.path.dirname(os.path.dirname(os.path.dirname(JOB)))
    env = {**os.environ, "PYTHONPATH": root, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with open(os.path.join(work, f"job{start}.err"), "wb") as err:
        argv = [str(seed), work, chaos.redis_url, ",".join(map(str, slot_points)), str(start), chaos.tag,
                chaos.via_redis, chaos.via_dsn or ""]
        if hosts is not None:
            argv += [hosts.master_url, hosts.bridge_ip, hosts.worker_python, str(hosts.tmp / "shared")]
            env.pop("PYTHONPATH")  # the job finds the checkout itself; the executors must not
        return subprocess.Popen([sys.executable, JOB, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, text=True, env=env, start_new_session=True)


def _due(points: list[int], work_done: int, worked: bool, outrun: bool) -> bool:
    """Whether the next of `points` is to be executed: reached by work done (`worked`: by work of
    the current driver process, where that matters), or outrun by the work."""
    return bool(points) and (work_done >= points[0] and worked or outrun)


def _watch(job: subprocess.Popen, faults: _Faults, result: RunResult, t0: float, err: str) -> bool:
    """Follow one driver process: its slot kills, and ours of it, of a host or of the connections
    at their points. A point the work outran is executed once the job has settled (all work done,
    its own points executed) for QUIET_POLLS lines; the job is told to stop once none is left. True
    when it finished the work (or failed: said in `result.problems`)."""
    first = None  # the work done when this process first reported: it must do some before it dies
    quiet = 0  # settled lines in a row since our last fault
    stopping = False
    try:
        for line in job.stdout:
            word, _, arg = line.strip().partition(" ")
            if word == "KILLED":
                faults.slot.pop(0)
                result.kills += 1
                continue
            if word == "DONE":
                result.rollbacks += int(arg or 0)
                return True
            if word != "PROGRESS":
                continue
            n, settled = (int(x) for x in arg.split())
            first = n if first is None else first
            faults.last = n
            quiet = quiet + 1 if settled else 0
            outrun = quiet >= QUIET_POLLS  # the work is done: the points left are executed now
            if _due(faults.cut, n, True, outrun):
                faults.cut.pop(0)
                cut(faults.proxies, result)
                quiet = 0
            elif _due(faults.host, n, n > first, outrun):
                faults.host.pop(0)
                faults.kill_a_host(result)
                quiet = 0
            elif _due(faults.driver, n, n > first, outrun):
                os.killpg(job.pid, signal.SIGKILL)  # the job's own group: driver, JVM, Python workers
                faults.driver.pop(0)
                result.kills += 1
                result.driver_kills += 1
                return False
            elif outrun and not faults.left and not stopping:
                stopping = True
                job.stdin.write("STOP\n")
                job.stdin.flush()
            if time.monotonic() - t0 > RUN_GUARD_SECS:
                result.problems.append(f"not finished within {RUN_GUARD_SECS} s")
                os.kill(job.pid, signal.SIGUSR1)  # its threads' stacks into its log, before it is killed
                time.sleep(2)
                return True
        with open(err, encoding="utf-8", errors="replace") as f:
            result.problems.append(f"the driver process ended without finishing: {f.read()[-1500:]}")
        return True
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()
