"""The contract every broker spout keeps, written once and run against the real RabbitMQ, Redis
Streams, NATS JetStream and Kafka (a Tansu broker started for the session)
on this machine (through tests/support/broker_admins.py and kafka_admin.py).

Skipped when a broker is unreachable, failed instead when CI=true (tests/support/broker_services.py).
"""

from __future__ import annotations

import os
import signal

import pytest

from squall import Bolt, Config, FailReason, LocalCluster
from squall.connectors.dead_letters import DL_ATTEMPTS, DL_ERROR, DL_REASON, DL_SOURCE
from tests.support.broker_admins import ADMINS, BROKERS
from tests.support.broker_kill_worker import DIED_AFTER_DEAD_LETTER, KILL_GROUP, read_ids, start_worker
from tests.support.broker_proxy import TcpProxy
from tests.support.broker_services import wait_until
from tests.support.broker_topology import (
    FileSink,
    Hold,
    Recorder,
    captured_ids,
    check_scenario,
    scenario_conf,
    spout_into,
    two_bolt_topology,
)

N = 10_000
MAX_RETRIES = 3
POISON = b'{"id": "poison", "poison": true}'


CONTRACT = BROKERS + ("kafka",)
RECONNECTING = BROKERS  # Kafka: clients reconnect to the advertised address, not through a proxy


def _admin(request):
    if request.param == "kafka":
        from tests.support.kafka_admin import KafkaAdmin

        return KafkaAdmin(request.getfixturevalue("kafka_broker"))
    return ADMINS[request.param]()


@pytest.fixture(params=CONTRACT)
def admin(request):
    a = _admin(request)
    yield a
    a.close()


@pytest.fixture(params=RECONNECTING)
def proxied_admin(request):
    a = _admin(request)
    yield a
    a.close()


def test_10k_messages_random_failures_and_a_poison_message(admin, cluster_kwargs):
    """Every message is processed and acked at the broker exactly once although 1% of the
    executions of each bolt fail; the poison message is dead-lettered after max_retries retries
    with the error that killed it."""
    source = admin.source("10k")
    admin.publish(source, [b'{"id": %d}' % i for i in range(N)] + [POISON])
    rec = Recorder()
    spout = admin.spout(source, rec, scheme="json", max_retries=MAX_RETRIES, retry_delay_secs=0.2)
    with LocalCluster(capture=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("10k", scenario_conf(cluster_kwargs["engine"]), two_bolt_topology(spout, 0.01))
        wait_until(lambda: rec.n_acked() >= N and rec.dead, 60,
                   lambda: f"acked {rec.n_acked()}/{N}, dead {len(rec.dead)}, spouts {rec.counters()}")
        seen = captured_ids(cluster, "10k")
        cluster.kill_topology("10k")  # closes the spout: its last acks go out
    check_scenario(rec, seen, N, "poison", MAX_RETRIES)
    wait_until(lambda: admin.settled(source), 10, lambda: f"{admin.left(source)} message(s) left at the source")
    [(body, info)] = admin.dead_letters(source)
    assert body == POISON
    assert info[DL_REASON] == "error" and info[DL_ATTEMPTS] == str(MAX_RETRIES + 1)
    assert "ValueError: poison message 'poison' cannot be parsed" in info[DL_ERROR]
    assert info[DL_SOURCE] == source


def test_bad_payloads_are_dead_lettered_with_a_decode_reason(admin, cluster_kwargs):
    """A payload the scheme cannot decode never reaches a bolt: it goes to the dead letters at
    once (no retry) with reason "decode" and why."""
    source = admin.source("bad")
    admin.publish(source, [b'{"id": 0}', b"\xff\xfe not utf-8", b'{"id": 1'])
    no_payload = admin.publish_without_payload(source)  # Redis: an entry without the payload field
    admin.publish(source, [b'{"id": 2}'])
    n_bad = 2 + (no_payload is not None)
    rec = Recorder()
    spout = admin.spout(source, rec, scheme="json", max_retries=1, retry_delay_secs=0.1)
    with LocalCluster(**cluster_kwargs) as cluster:
        cluster.submit_topology("bad", scenario_conf(cluster_kwargs["engine"], 100), two_bolt_topology(spout, 0))
        wait_until(lambda: rec.n_acked() >= 2 and len(rec.dead) >= n_bad, 30,
                   lambda: f"acked {dict(rec.acked)}, dead {[str(d[2]) for d in rec.dead]}")
        errors = cluster.get_errors("bad")
        cluster.kill_topology("bad")
    assert sorted(rec.acked) == [0, 2]
    dead = dict(admin.dead_letters(source))
    assert len(dead) == n_bad
    assert {info[DL_REASON] for info in dead.values()} == {"decode"}
    assert {info[DL_ATTEMPTS] for info in dead.values()} == {"1"}  # decoding is not retried
    assert "not valid UTF-8" in dead[b"\xff\xfe not utf-8"][DL_ERROR]
    assert "not valid JSON" in dead[b'{"id": 1'][DL_ERROR]
    if no_payload is not None:
        assert no_payload in dead[None][DL_ERROR]
    assert not [e for e in errors if e.component != "src"], errors  # nothing reached the bolts
    wait_until(lambda: admin.settled(source), 10, lambda: f"{admin.left(source)} message(s) left at the source")


def test_the_spout_holds_at_most_max_spout_pending(admin):
    """With max.spout.pending 5 and a bolt that holds every tuple, the spout emits 5 and takes
    no more from the broker than that, or than twice that where it reads ahead (`read_ahead`);
    closing it acks none of them."""
    source = admin.source("pending")
    admin.publish(source, [b"m%d" % i for i in range(20)])
    rec = Recorder()
    conf = Config()
    conf.set_max_spout_pending(5)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("pending", conf, spout_into(admin.spout(source, rec), Hold()))
        wait_until(lambda: rec.spouts and rec.spouts[0].counters.emitted >= 5, 10, "5 emitted")
        cluster.wait_idle(10)
        assert rec.spouts[0].counters.emitted == 5
        ready = admin.ready(source)  # None: the broker does not know (Kafka: nothing is committed)
        taken = 5 * rec.spouts[0].read_ahead  # 5 in flight, and as many read ahead where it reads ahead
        assert ready is None or ready == 20 - taken  # the rest still waiting at the broker
        cluster.kill_topology("pending")
    assert admin.left(source) == 20


class FailTwice(Bolt):
    """Fails the first two attempts of every tuple; emits the attempt number of the third."""

    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        d.declare(["attempts", "source"])

    def execute(self, t):
        meta = t[-1]  # the meta field comes last
        if meta["attempts"] <= 2:
            self.c.fail(t)
            return
        self.c.emit([meta["attempts"], meta["source"]], anchors=t)
        self.c.ack(t)


def test_a_retried_message_carries_its_attempt_number(admin):
    """A message whose tree fails comes back with its attempt number one higher (RabbitMQ: the
    x-squall-attempts header; Redis: the entry's delivery count; JetStream: its delivery count)."""
    source = admin.source("attempts")
    admin.publish(source, [b'{"id": 0}'])
    rec = Recorder()
    spout = admin.spout(source, rec, scheme="json", meta_field="meta", max_retries=5, retry_delay_secs=0.05)
    with LocalCluster(engine="local", capture=True) as cluster:
        cluster.submit_topology("attempts", Config(), spout_into(spout, FailTwice(), "f"))
        wait_until(lambda: rec.acked[0] == 1, 20, lambda: f"spouts {rec.counters()}")
        out = cluster.coordinator("attempts").captured["f"]["default"]
        cluster.kill_topology("attempts")
    assert [v for vals in out.values() for v in vals] == [[3, source]]
    assert rec.spouts[0].counters.retried == 2 and rec.spouts[0].counters.failed == 2


class LoseThrice(Bolt):
    """Fails the first three attempts of every tuple as a dead worker's wave does (reason "lost");
    emits the attempt number of the fourth."""

    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        d.declare(["attempts"])

    def execute(self, t):
        if t[-1]["attempts"] <= 3:
            self.c.fail_with_reason(t, FailReason("lost", error="the worker died"))
            return
        self.c.emit([t[-1]["attempts"]], anchors=t)
        self.c.ack(t)


@pytest.mark.parametrize("max_deliveries", [None, 3])
def test_a_tree_lost_with_its_worker_uses_no_retry(admin, max_deliveries):
    """A tree lost because its worker died is not the message's fault: with `max_retries=1` a
    message lost three times is still processed on its fourth delivery. Only a message delivered
    `max_deliveries` times without an ack (a crash loop) is dead-lettered, reason "lost"."""
    source = admin.source("lost")
    admin.publish(source, [b'{"id": 0}'])
    rec = Recorder()
    spout = admin.spout(source, rec, scheme="json", meta_field="meta", max_retries=1, retry_delay_secs=0.05,
                        max_deliveries=max_deliveries)
    with LocalCluster(engine="local", capture=True) as cluster:
        cluster.submit_topology("lost", Config(), spout_into(spout, LoseThrice(), "f"))
        wait_until(lambda: rec.acked[0] == 1 or rec.dead, 20, lambda: f"spouts {rec.counters()}")
        out = cluster.coordinator("lost").captured.get("f", {}).get("default", {})
        cluster.kill_topology("lost")
    if max_deliveries is None:  # the default: max(10, 2 * (max_retries + 1))
        assert [v for vals in out.values() for v in vals] == [[4]] and not rec.dead
        assert rec.spouts[0].counters.retried == 3
    else:
        [(key, _m, failure)] = rec.dead
        assert key == 0 and failure.kind == "lost" and failure.attempts == 3 and not out


def test_a_dropped_connection_loses_nothing(proxied_admin):
    """Cut the spout's connections mid-stream, after half a second in which what it sends is
    lost (acks included): it says so, reconnects, and in the end every message is processed and
    acked, and nothing is left at the broker. A spout whose broker can confirm acks (JetStream:
    a flush on the same connection) sends the lost ones again, so no message comes back twice."""
    admin = proxied_admin
    n = 3000
    source = admin.source("drop")
    admin.publish(source, [b'{"id": %d}' % i for i in range(n)])
    proxy = TcpProxy("127.0.0.1", admin.port)
    rec = Recorder()
    spout = admin.spout(source, rec, url=admin.url_via(proxy.port), scheme="json")
    try:
        with LocalCluster(engine="local") as cluster:
            conf = Config()
            conf.set_max_spout_pending(200)
            conf.set_message_timeout_secs(5)
            sink = FileSink(os.devnull, delay_ms=0.5)
            cluster.submit_topology("drop", conf, two_bolt_topology(spout, 0.0, sink=sink, parallelism=1))
            wait_until(lambda: rec.n_acked() >= 500, 30, lambda: f"acked {rec.n_acked()}")
            assert rec.n_acked() < n, "finished before the drop: the test proves nothing"
            assert proxy.drop(dark_secs=0.5) >= 1
            wait_until(lambda: rec.n_acked() >= n, 60, lambda: f"acked {rec.n_acked()}/{n}, {rec.counters()}",
                       progress=rec.n_acked)
            wait_until(lambda: rec.total("reconnects") >= 1, 20, lambda: f"a reconnect, {rec.counters()}")
            # Still running: a broker that redelivers what lost its ack gets it processed again.
            wait_until(lambda: admin.settled(source), 30, lambda: f"{admin.left(source)} message(s) left at the source")
            errors = cluster.get_errors("drop")
            cluster.kill_topology("drop")
    finally:
        proxy.close()
    assert set(rec.acked) == set(range(n))
    assert any(f"127.0.0.1:{proxy.port}" in e.error for e in errors if e.component == "src"), errors
    if admin.acks_confirmed:
        twice = [key for key, times in rec.acked.items() if times > 1]
        assert not twice, f"{len(twice)} message(s) acked more than once, e.g. {twice[:5]}"


def stop_while_holding(admin, source: str, worker, out, tries: int = 50) -> None:
    """SIGSTOP the worker at a moment the broker counts messages it holds unacked (where the
    broker tells: not RabbitMQ, whose prefetch always holds some). Checking and then killing a
    running worker are two steps: a spout that acked its whole batch between them, before taking
    the next, held nothing (seen on Redis). Stopped, the worker acks nothing more: the broker's
    count after a round trip (what the worker had sent has landed) is what the kill leaves."""
    for _ in range(tries):
        assert worker.poll() is None, "the worker ended before the kill"
        os.kill(worker.pid, signal.SIGSTOP)
        admin.unacked(source, KILL_GROUP)
        unacked = admin.unacked(source, KILL_GROUP)
        if unacked is None or unacked > 0:
            return
        os.kill(worker.pid, signal.SIGCONT)
        done = sum(read_ids(out).values())
        wait_until(lambda done=done: sum(read_ids(out).values()) > done, 30, f"the worker to go on past {done} lines")
    raise AssertionError(f"the worker held nothing unacked at any of {tries} stops")


def test_a_killed_process_loses_nothing(admin, tmp_path):
    """SIGKILL the topology's process while its spout holds unacked messages (counted at the
    broker); a new process with the same group gets them back (RabbitMQ requeues them at once,
    Redis lets them be claimed once idle past the message timeout, JetStream redelivers them
    after its AckWait) and every message is processed."""
    n = 2000
    source = admin.source("kill")
    admin.publish(source, [b'{"id": %d}' % i for i in range(n)])
    out = tmp_path / "out.txt"

    worker = start_worker(admin.broker, source, out, delay_ms=1, url=getattr(admin, "worker_url", None))
    try:
        wait_until(lambda: sum(read_ids(out).values()) >= n // 4, 60, lambda: f"{sum(read_ids(out).values())} lines")
        stop_while_holding(admin, source, worker, out)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
        assert len(set(read_ids(out))) < n, "finished before the kill: the test proves nothing"
        held = admin.held_by_killed(source, KILL_GROUP)
        assert held > 0, "the killed consumer held nothing unacked: the test proves nothing"
        worker = start_worker(admin.broker, source, out, delay_ms=1, url=getattr(admin, "worker_url", None))
        wait_until(lambda: set(read_ids(out)) >= set(range(n)), 90,
                   lambda: f"{len(set(range(n)) - set(read_ids(out)))} ids missing; stderr: "
                           f"{(tmp_path / 'out.txt.stderr').read_text()[-2000:]}",
                   progress=lambda: len(read_ids(out)))
        # Every id written is not every message acked: the new worker may still hold some it read
        # again (the killed one's, claimed; failed ones waiting to replay). Stopped then, it left
        # them unacked (100 at the Redis source, once in a full run). So the source must settle
        # while it runs.
        wait_until(lambda: admin.settled(source, KILL_GROUP), 60,
                   lambda: f"{admin.left(source, KILL_GROUP)} message(s) left at the source",
                   progress=lambda: admin.left(source, KILL_GROUP))
    finally:
        if worker.poll() is None:
            worker.terminate()  # closes its topology: the last acks go out
            os.kill(worker.pid, signal.SIGCONT)  # in case it failed while stopped
            worker.wait(30)
    assert set(read_ids(out)) == set(range(n))
    wait_until(lambda: admin.settled(source, KILL_GROUP), 20,
               lambda: f"{admin.left(source, KILL_GROUP)} message(s) left at the source")


def test_a_kill_between_the_dead_letter_and_the_ack_loses_nothing(admin, tmp_path):
    """The worker dies right after the broker confirmed a poison message's dead letter and before
    the message was acked at its source. A new worker gets the message again and dead-letters it
    again: at least once in the dead letters, never lost. On Redis the dead letter and the ack are
    one transaction, so it is there exactly once."""
    source = admin.source("dlkill")
    n = 20
    admin.publish(source, [b'{"id": %d}' % i for i in range(n)] + [POISON])
    out = tmp_path / "out.txt"
    url = getattr(admin, "worker_url", None)
    worker = start_worker(admin.broker, source, out, delay_ms=0, url=url, die_after_dead_letter=True)
    try:
        code = worker.wait(120)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert code == DIED_AFTER_DEAD_LETTER, (tmp_path / "out.txt.stderr").read_text()[-2000:]
    poison = [body for body, _ in admin.dead_letters(source) if body and b"poison" in body]
    assert len(poison) == 1, "the dead letter was confirmed before the worker died"
    worker = start_worker(admin.broker, source, out, delay_ms=0, url=url)
    try:
        wait_until(lambda: set(read_ids(out)) >= set(range(n)), 90,
                   lambda: f"{len(set(range(n)) - set(read_ids(out)))} ids missing")
        wait_until(lambda: admin.settled(source, KILL_GROUP), 90,
                   lambda: f"{admin.left(source, KILL_GROUP)} message(s) left at the source")
    finally:
        worker.terminate()
        worker.wait(30)
    poison = [body for body, _ in admin.dead_letters(source) if body and b"poison" in body]
    assert 1 <= len(poison) <= 2, f"{len(poison)} dead letters of the poison message"
    if admin.broker == "redis":
        assert len(poison) == 1
