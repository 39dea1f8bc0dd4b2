"""Shared pieces of the broker connector tests: reaching the brokers (skip, or fail when
CI=true), the two-bolt topology, a recorder the spouts share with the test, a TCP proxy that can
drop connections, and the worker process of the kill tests.

Run as a script it is that worker:

    python tests/support/connector_helpers.py worker {rabbitmq|redis|nats} NAME OUTFILE [--delay-ms N]

It consumes NAME (a queue; a stream with group "squall-kill"; a stream with durable
"squall-kill") on the local engine and appends each processed message id to OUTFILE, one line
each, flushed per line, until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # as a script: import squall and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pytest

from squall import Bolt, Config, LocalCluster, TopologyBuilder
from squall.connectors.base import redact_url

ROOT = Path(__file__).resolve().parents[2]
CI = os.environ.get("CI", "").strip().lower() == "true"

RABBITMQ_URL = os.environ.get("SQUALL_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
REDIS_URL = os.environ.get("SQUALL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
NATS_URL = os.environ.get("SQUALL_TEST_NATS_URL", "nats://127.0.0.1:4222")

_reachable: dict[str, str | None] = {}  # service -> None (reachable) or why not


def need_service(name: str, where: str, probe: Callable[[], None]) -> None:
    """Skip the test when the service is unreachable; fail it instead when CI=true."""
    if name not in _reachable:
        try:
            probe()
            _reachable[name] = None
        except Exception as e:  # noqa: BLE001
            _reachable[name] = f"{type(e).__name__}: {e}"
    why = _reachable[name]
    if why is None:
        return
    if CI:
        pytest.fail(f"{name} at {where} is required when CI=true, and it is unreachable: {why}", pytrace=False)
    pytest.skip(f"{name} is not reachable at {where} ({why}); start it to run this test (with CI=true a "
                f"missing {name} is a failure)")


def need_rabbitmq() -> str:
    def probe() -> None:
        import pika

        params = pika.URLParameters(RABBITMQ_URL)
        params.connection_attempts = 1
        params.socket_timeout = 2
        pika.BlockingConnection(params).close()

    need_service("RabbitMQ", redact_url(RABBITMQ_URL), probe)
    return RABBITMQ_URL


def need_redis() -> str:
    def probe() -> None:
        import redis

        r = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        r.ping()
        r.close()

    need_service("Redis", redact_url(REDIS_URL), probe)
    return REDIS_URL


def need_nats() -> str:
    def probe() -> None:
        async def check() -> None:
            import nats

            async def quiet(e: Exception) -> None:
                pass

            nc = await asyncio.wait_for(nats.connect(NATS_URL, connect_timeout=2, allow_reconnect=False,
                                                     max_reconnect_attempts=1, error_cb=quiet), 5)
            try:
                await nc.jetstream().account_info()  # JetStream enabled?
            finally:
                await nc.close()

        asyncio.run(check())

    need_service("NATS JetStream", redact_url(NATS_URL), probe)
    return NATS_URL


def unique(prefix: str) -> str:
    return f"squall-test-{prefix}-{uuid.uuid4().hex[:10]}"


def wait_until(predicate: Callable[[], bool], timeout: float, what: Callable[[], str] | str) -> None:
    """Poll `predicate` until true; AssertionError saying what was still missing at the deadline."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout}s: {what() if callable(what) else what}")
        time.sleep(0.05)


# -- what the spouts share with the test ------------------------------------------------------


def message_key(body: bytes | None) -> Any:
    """The id inside a test message ({"id": ...}), or the raw body when it is not one."""
    try:
        return json.loads(body)["id"]
    except Exception:  # noqa: BLE001
        return body


class Recorder:
    """Final acks and dead letters seen by every copy of a spout (copies share it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: Counter = Counter()
        self.dead: list[tuple[Any, Any, Any]] = []  # (key, message, failure)
        self.spouts: list[Any] = []

    def __deepcopy__(self, memo: dict) -> Recorder:
        return self

    def record_ack(self, message: Any) -> None:
        with self.lock:
            self.acked[message_key(message.body)] += 1

    def record_dead(self, message: Any, failure: Any) -> None:
        with self.lock:
            self.dead.append((message_key(message.body), message, failure))

    def n_acked(self) -> int:
        return len(self.acked)

    def counters(self) -> list[dict]:
        return [s.counters.as_dict() for s in self.spouts]


class Recording:
    """Mixin for a connector spout: reports final acks and dead letters to `recorder`."""

    recorder: Recorder | None = None

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        if self.recorder is not None:
            self.recorder.spouts.append(self)

    def on_acked(self, message: Any) -> None:
        if self.recorder is not None:
            self.recorder.record_ack(message)

    def on_dead_lettered(self, message: Any, failure: Any) -> None:
        if self.recorder is not None:
            self.recorder.record_dead(message, failure)


# -- bolts --------------------------------------------------------------------------------------


class FlakyParse(Bolt):
    """[message] -> [id]; raises for {"poison": true}, and at random for `fail_rate` of inputs."""

    def __init__(self, fail_rate: float = 0.0, seed: int = 7):
        self.fail_rate = fail_rate
        self.seed = seed

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.rng = random.Random(self.seed * 1000 + context.this_task_index)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id"])

    def execute(self, t: Any) -> None:  # noqa: A002
        msg = t[0]
        if isinstance(msg, dict) and msg.get("poison"):
            raise ValueError(f"poison message {msg.get('id')!r} cannot be parsed")
        if self.fail_rate and self.rng.random() < self.fail_rate:
            raise RuntimeError("random parse failure")
        self.collector.emit([msg["id"]], anchors=t)
        self.collector.ack(t)


class FlakySink(Bolt):
    """[id] -> [id] (the captured output); raises at random for `fail_rate` of inputs."""

    def __init__(self, fail_rate: float = 0.0, seed: int = 11):
        self.fail_rate = fail_rate
        self.seed = seed

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.rng = random.Random(self.seed * 1000 + context.this_task_index)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id"])

    def execute(self, t: Any) -> None:  # noqa: A002
        if self.fail_rate and self.rng.random() < self.fail_rate:
            raise RuntimeError("random sink failure")
        self.collector.emit([t[0]], anchors=t)
        self.collector.ack(t)


class FileSink(Bolt):
    """Appends each id to a file, one line each, flushed per line (local engine only: it keeps
    the file open). `delay_ms` slows it down so that a kill lands mid-stream."""

    def __init__(self, path: str, delay_ms: float = 0.0):
        self.path = path
        self.delay_ms = delay_ms

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        self.out = open(self.path, "a", buffering=1)  # noqa: SIM115 - open for the task's life

    def declare_output_fields(self, declarer: Any) -> None:
        pass

    def execute(self, t: Any) -> None:  # noqa: A002
        if self.delay_ms:
            time.sleep(self.delay_ms / 1000)
        self.out.write(f"{t[0]}\n")
        self.collector.ack(t)

    def cleanup(self) -> None:
        self.out.close()


def two_bolt_topology(spout: Any, fail_rate: float = 0.01, sink: Any = None, parallelism: int = 2):
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("parse", FlakyParse(fail_rate), parallelism=parallelism).shuffle_grouping("src")
    b.set_bolt("sink", sink or FlakySink(fail_rate), parallelism=parallelism).shuffle_grouping("parse")
    return b.create_topology()


def scenario_conf(engine: str, max_pending: int = 5000, timeout: float = 30) -> Config:
    conf = Config()
    conf.set_message_timeout_secs(timeout)
    conf.set_max_spout_pending(max_pending)
    if engine == "spark":
        conf[Config.SQUALL_WAVE_MAX_TUPLES] = max_pending
        conf[Config.SQUALL_WAVE_MAX_SECS] = 1.0
    return conf


def captured_ids(cluster: LocalCluster, name: str, component: str = "sink") -> Counter:
    per_task = cluster.coordinator(name).captured.get(component, {}).get("default", {})
    return Counter(v[0] for vals in per_task.values() for v in vals)


def check_scenario(rec: Recorder, seen: Counter, n: int, poison_key: Any, max_retries: int) -> None:
    """The 10,000-message scenario's promises, from the spout's and the output's side."""
    ids = set(range(n))
    missing = ids - set(seen)
    assert not missing, f"{len(missing)} message(s) never processed, e.g. {sorted(missing)[:10]}"
    extra = sorted(set(rec.acked) - ids, key=str)[:10]
    assert set(rec.acked) == ids, (f"acked at the broker: {len(rec.acked)} ids; missing "
                                   f"{sorted(ids - set(rec.acked))[:10]}, extra {extra}")
    twice = {k: c for k, c in rec.acked.items() if c != 1}
    assert not twice, f"messages acked more than once at the broker: {dict(list(twice.items())[:10])}"
    assert [d[0] for d in rec.dead] == [poison_key], f"dead letters: {[(d[0], str(d[2])) for d in rec.dead]}"
    failure = rec.dead[0][2]
    assert failure.kind == "error" and failure.component == "parse", failure
    assert "poison message" in (failure.error or ""), failure
    assert failure.attempts == max_retries + 1, failure
    totals = Counter()
    for c in rec.counters():
        totals.update(c)
    # 1% of executions of each bolt raise: some of the 10,000 must have been retried.
    assert totals["retried"] > max_retries, totals
    assert totals["acked"] == n and totals["dead_lettered"] == 1, totals


# -- a TCP proxy that can drop every connection -------------------------------------------------


class TcpProxy:
    """Forwards 127.0.0.1:<port> to a broker; `drop()` cuts every open connection (as a network
    failure would); new connections are accepted as before."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.lock = threading.Lock()
        self.socks: list[socket.socket] = []
        self.closed = False
        self.drops = 0
        threading.Thread(target=self._accept, daemon=True, name="tcp-proxy").start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.socks += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def drop(self) -> int:
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.drops += 1
        return len(socks) // 2

    def close(self) -> None:
        self.closed = True
        self.server.close()
        self.drop()


# -- the kill-test worker -------------------------------------------------------------------------


KILL_GROUP = "squall-kill"
KILL_TIMEOUT_SECS = 3


def kill_worker_spout(broker: str, name: str) -> Any:
    if broker == "rabbitmq":
        from squall.connectors.rabbitmq import RabbitMQSpout

        return RabbitMQSpout(name, RABBITMQ_URL, scheme="json", retry_delay_secs=0.2)
    if broker == "redis":
        from squall.connectors.redis import RedisStreamSpout

        return RedisStreamSpout(name, KILL_GROUP, REDIS_URL, scheme="json", retry_delay_secs=0.2)
    if broker == "nats":
        from squall.connectors.nats import JetStreamSpout

        return JetStreamSpout(name, durable=KILL_GROUP, url=NATS_URL, scheme="json", retry_delay_secs=0.2)
    raise ValueError(f"unknown broker {broker!r}")


def start_worker(broker: str, name: str, out: Path, delay_ms: float = 1.0) -> Any:
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(f"{out}.stderr", "ab") as err:  # the worker's stderr, for the test's failure message
        return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "worker", broker, name, str(out),
                                 "--delay-ms", str(delay_ms)], env=env, cwd=str(ROOT),
                                stdout=subprocess.DEVNULL, stderr=err)


def read_ids(path: Path) -> Counter:
    if not path.exists():
        return Counter()
    with open(path) as f:
        return Counter(int(line) for line in f if line.strip())


def worker_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="connector_helpers.py worker")
    p.add_argument("broker", choices=("rabbitmq", "redis", "nats"))
    p.add_argument("name")
    p.add_argument("out")
    p.add_argument("--delay-ms", type=float, default=1.0)
    args = p.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    spout = kill_worker_spout(args.broker, args.name)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("parse", FlakyParse(0.0)).shuffle_grouping("src")
    b.set_bolt("sink", FileSink(args.out, args.delay_ms)).shuffle_grouping("parse")
    conf = Config()
    conf.set_message_timeout_secs(KILL_TIMEOUT_SECS)
    conf.set_max_spout_pending(100)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("kill-test", conf, b.create_topology())
        while not stop.wait(0.2):
            pass
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sys.exit(worker_main(sys.argv[2:]))
    print(__doc__)
    sys.exit(2)
