"""What the broker tests run: a recorder the spouts share with the test, the bolts and the
two-bolt topology, and the checks of the 10,000-message scenario."""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import zlib
from collections import Counter
from typing import Any

import pytest

from squall import Bolt, Config, LocalCluster, TopologyBuilder

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

    def total(self, counter: str) -> int:
        return sum(c.get(counter, 0) for c in self.counters())


class Recording:
    """Mixin for a connector spout: reports final acks and dead letters to `recorder`, which the
    test reads in its own process, so the spout runs in the driver (DRIVER_BOUND). Connector
    spouts on executors are run by tests/support/netns_job.py and bench/brokers.py."""

    recorder: Recorder | None = None
    DRIVER_BOUND = True

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


class _Flaky(Bolt):
    """A bolt that fails `fail_rate` of its inputs at random (seeded per component and task)."""

    def __init__(self, fail_rate: float = 0.0, seed: int = 7):
        self.fail_rate = fail_rate
        self.seed = seed

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        key = f"{self.seed}/{context.this_component_id}/{context.this_task_index}"
        self.rng = random.Random(zlib.crc32(key.encode()))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id"])

    def unlucky(self) -> bool:
        return bool(self.fail_rate) and self.rng.random() < self.fail_rate


class FlakyParse(_Flaky):
    """[message] -> [id]; raises for {"poison": true}, and at random for `fail_rate` of inputs."""

    def execute(self, t: Any) -> None:  # noqa: A002
        msg = t["value"] if t.contains("value") else t[0]  # Kafka emits (topic, partition, offset, key, value)
        if isinstance(msg, dict) and msg.get("poison"):
            raise ValueError(f"poison message {msg.get('id')!r} cannot be parsed")
        if self.unlucky():
            raise RuntimeError("random parse failure")
        self.collector.emit([msg["id"]], anchors=t)
        self.collector.ack(t)


class FlakySink(_Flaky):
    """[id] -> [id] (the captured output); raises at random for `fail_rate` of inputs."""

    def __init__(self, fail_rate: float = 0.0, seed: int = 11):
        super().__init__(fail_rate, seed)

    def execute(self, t: Any) -> None:  # noqa: A002
        if self.unlucky():
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


class Hold(Bolt):
    """Holds every tuple, never acks: its trees stay in flight (for as long as the test runs)."""

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.held: list[Any] = []

    def declare_output_fields(self, declarer: Any) -> None:
        pass

    def execute(self, t: Any) -> None:  # noqa: A002
        self.held.append(t)


def spout_into(spout: Any, bolt: Any, name: str = "b"):
    """The one-bolt topology: `spout` -> `bolt`."""
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt(name, bolt).shuffle_grouping("src")
    return b.create_topology()


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


def open_fails_without_showing(spout: Any, secret: str, caplog: Any) -> str:
    """Submit a topology of `spout` alone: its open must fail with a ConnectionError that shows
    neither in its text nor in any log line the secret `secret`. The error text, for more checks."""
    caplog.set_level(logging.DEBUG)
    b = TopologyBuilder()
    b.set_spout("src", spout)
    with LocalCluster(engine="local") as cluster, pytest.raises(ConnectionError) as ei:
        cluster.submit_topology("pw", Config(), b.create_topology())
    text = str(ei.value)
    assert secret not in text, text
    assert secret not in caplog.text
    assert secret not in repr(spout)
    return text
