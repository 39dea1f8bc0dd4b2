"""What only the JetStream spout does: its consumer settings, in-progress acks, the dead letter
of a message whose deliveries ran out, its settings and credentials (against a nats-server with
auth that the test starts itself), its module name. The broker contract (acks, retries, dead
letters, drops, kills) is in test_broker_contract.py.

Skipped when NATS is unreachable, failed instead when CI=true (tests/support/broker_services.py).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest

from squall import Bolt, Config, LocalCluster
from squall.connectors.dead_letters import DL_REASON
from squall.connectors.nats import JetStreamSpout
from tests.support.broker_admins import GROUP, RecNats
from tests.support.broker_nats_server import nats_server_with_auth
from tests.support.broker_services import check_module_does_not_shadow, wait_until
from tests.support.broker_topology import FileSink, Hold, Recorder, open_fails_without_showing, spout_into

nats = pytest.importorskip("nats")


def test_consumer_settings_follow_the_topology(nats_admin):
    """AckWait is the message timeout, max_deliver is max_deliveries (default: max(10, 2 *
    (max_retries + 1)), else the topology's squall.max.deliveries), max_ack_pending is
    max.spout.pending; an existing durable is updated to match."""
    stream = nats_admin.source("cfg")
    spout = JetStreamSpout(stream, durable=GROUP, url=nats_admin.url, max_retries=5)
    for timeout, pending, deliveries in ((7, 123, None), (9, 45, 7)):
        conf = Config()
        conf.set_message_timeout_secs(timeout)
        conf.set_max_spout_pending(pending)
        conf[Config.SQUALL_MAX_DELIVERIES] = deliveries
        with LocalCluster(engine="local") as cluster:
            cluster.submit_topology("cfg", conf, spout_into(spout, Hold()))
            c = nats_admin.consumer(stream).config
            cluster.kill_topology("cfg")
        assert (c.ack_wait, c.max_deliver, c.max_ack_pending) == (timeout, deliveries or 12, pending)
        assert str(getattr(c.ack_policy, "value", c.ack_policy)) == "explicit" and c.durable_name == GROUP


def test_messages_in_flight_for_long_are_not_redelivered(nats_admin):
    """A tree that runs longer than the AckWait: the spout sends in-progress acks, so the
    server does not hand the message out again."""
    stream = nats_admin.source("hold")
    nats_admin.publish(stream, [b"x"])
    rec = Recorder()
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("hold", Config(), spout_into(nats_admin.spout(stream, rec, ack_wait_secs=1.0), Hold()))
        wait_until(lambda: rec.spouts and rec.spouts[0].counters.extra.get("touched", 0) >= 6, 20, "6 touches")
        info = nats_admin.consumer(stream)
        emitted = rec.spouts[0].counters.emitted
        cluster.kill_topology("hold")
    assert emitted == 1 and info.num_redelivered == 0 and info.num_ack_pending == 1


def test_a_message_whose_deliveries_ran_out_is_dead_lettered_as_lost(nats_admin):
    """Another consumer of the durable took the message and died on its last allowed delivery:
    the server stops delivering it and says so in an advisory; the spout dead-letters it.

    The spout is not running while the other consumer takes the message (a running spout, even
    deactivated, may have a pull request on its way to the server, and get it instead)."""
    stream = nats_admin.source("lost")
    rec = Recorder()
    spout = nats_admin.spout(stream, rec, max_retries=0, max_deliveries=1)
    conf = Config()
    conf.set_message_timeout_secs(2)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("lost", conf, spout_into(spout, FileSink(os.devnull)))  # the durable: max_deliver 1
        cluster.kill_topology("lost")
    wait_until(lambda: nats_admin.consumer(stream).num_waiting == 0, 10, "the spout's last pull request to end")

    async def take_and_die():
        psub = await nats_admin.js.pull_subscribe_bind(durable=GROUP, stream=stream)
        await nats_admin.js.publish(stream, b"doomed")
        msgs = await psub.fetch(1, timeout=10)
        return msgs[0].data

    assert nats_admin.run(take_and_die()) == b"doomed"
    with LocalCluster(engine="local") as cluster:  # the spout pulls: the server finds the deliveries ran out
        cluster.submit_topology("lost", conf, spout_into(spout, FileSink(os.devnull)))
        wait_until(lambda: nats_admin.dead_letters(stream), 20, "a dead letter")
        wait_until(lambda: rec.dead, 10, "the spout's dead-letter hook")
        cluster.kill_topology("lost")
    [(key, _m, failure)] = rec.dead
    assert key == b"doomed" and failure.kind == "lost"
    [(body, info)] = nats_admin.dead_letters(stream)
    assert body == b"doomed" and info[DL_REASON] == "lost"


class FailWithMeta(Bolt):
    """Records each tuple's meta field, then fails the tuple."""

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector

    def declare_output_fields(self, declarer: Any) -> None:
        pass

    def execute(self, t: Any) -> None:  # noqa: A002
        with open(self.path, "a") as f:
            f.write(json.dumps(t["meta"]) + "\n")
        self.collector.fail(t)


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "nats-py-path"])
def test_a_message_keeps_its_headers_to_the_meta_field_and_the_dead_letter(nats_admin, tmp_path, monkeypatch, lean):
    """The spout reads the pull's messages off the protocol parser (nats.wire): a message's
    headers still reach the tuple's meta field, and its dead letter, as nats-py parses them.
    A nats-py without the internals nats.wire uses takes its public path, with the same result."""
    if not lean:
        monkeypatch.setattr("squall.connectors.nats.wire.supported", lambda nc, sub: False)
    stream = nats_admin.source("hdr")
    nats_admin.run(nats_admin.js.publish(stream, b"with-headers", headers={"trace": "t-1", "tenant": "acme"}))
    nats_admin.publish(stream, [b"plain"])
    rec = Recorder()
    spout = nats_admin.spout(stream, rec, meta_field="meta", max_retries=0)
    bolt = FailWithMeta()
    bolt.path = str(tmp_path / "meta.jsonl")
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("hdr", Config(), spout_into(spout, bolt))
        wait_until(lambda: len(rec.dead) == 2, 20, lambda: f"2 dead letters, {rec.counters()}")
        took_lean = cluster.coordinator("hdr").spouts[0].spout._lean
        cluster.kill_topology("hdr")
    assert took_lean == lean, "the installed nats-py lacks the internals nats.wire uses: the spout took its public path"
    metas = {m["id"][0]: m for m in map(json.loads, open(bolt.path))}
    assert len(metas) == 2
    first, second = metas[min(metas)], metas[max(metas)]
    assert first["headers"]["trace"] == "t-1" and first["headers"]["tenant"] == "acme"
    assert second["headers"] == {} and first["subject"] == second["subject"] == stream
    dead = nats_admin.run(nats_admin.js.get_msg(f"{stream}_DLQ", 1))
    assert dead.data == b"with-headers" and dead.headers["trace"] == "t-1"
    assert dead.headers["squall-reason"] == "failed"


def test_settings_from_the_environment_and_secrets_never_shown(monkeypatch):
    monkeypatch.setenv("NATS_URL", "nats://a.example:4222,nats://bob:hunter2@b.example:4223")
    monkeypatch.setenv("NATS_USER", "carol")
    monkeypatch.setenv("NATS_PASSWORD", "pa/ss:word")
    monkeypatch.setenv("NATS_TOKEN", "t0ken-value")
    spout = JetStreamSpout("S")
    assert spout.url == "nats://a.example:4222,nats://bob:***@b.example:4223"
    assert spout.user == "carol" and spout._password.reveal() == "pa/ss:word"
    for text in (repr(spout), repr(spout.__dict__)):
        assert "hunter2" not in text
        assert "pa/ss:word" not in text and "t0ken-value" not in text
    assert JetStreamSpout("S", url="nats://tok3n@h:1").url == "nats://***@h:1"


def test_a_wrong_password_fails_at_open_without_showing_it(tmp_path, caplog):
    """Against a nats-server with user/password auth (started here): a wrong password, in the URL
    or as an argument, fails at open with an error that says the server refused the credentials
    and never shows the password; the right one consumes."""
    with nats_server_with_auth(tmp_path / "nats", "u", "R1ght-pw") as url:
        hostport = url.split("://", 1)[1]
        in_url = JetStreamSpout("S", url=f"nats://u:Sup3r-S3cret-pw@{hostport}", connect_timeout_secs=5)
        text = open_fails_without_showing(in_url, "Sup3r-S3cret-pw", caplog)
        assert f"nats://u:***@{hostport}" in text and "refused the credentials" in text, text
        assert "Authorization Violation" in text, text
        as_arg = JetStreamSpout("S", url=url, user="u", password="Sup3r-S3cret-pw", connect_timeout_secs=5)
        text = open_fails_without_showing(as_arg, "Sup3r-S3cret-pw", caplog)
        assert "refused the credentials" in text and "Authorization Violation" in text, text

        async def publish() -> None:
            nc = await nats.connect(url, user="u", password="R1ght-pw")
            await nc.jetstream().add_stream(name="S", subjects=["S"])
            await nc.jetstream().publish("S", b"hello")
            await nc.close()

        asyncio.run(publish())
        rec = Recorder()
        right = RecNats("S", durable=GROUP, url=url, user="u", password="R1ght-pw", connect_timeout_secs=5)
        right.recorder = rec
        with LocalCluster(engine="local") as cluster:
            cluster.submit_topology("pw", Config(), spout_into(right, FileSink(os.devnull)))
            wait_until(lambda: rec.acked, 20, lambda: f"the message acked, {rec.counters()}")
            cluster.kill_topology("pw")
    assert rec.acked == {b"hello": 1}
    assert "R1ght-pw" not in caplog.text


def test_the_module_name_does_not_shadow_nats_py():
    check_module_does_not_shadow("nats", "nats.connect", "connect", "JetStreamSpout", "nats.jetstream")


@pytest.mark.parametrize("reply", [
    "$JS.ACK.orders.squall.3.1234.77.1700000000000000000.5",  # v1
    "$JS.ACK._.acchash.orders.squall.2.99.12.1700000000000000000.0.tok",  # v2, no domain, with a token
    "$JS.ACK.hub.acchash.orders.squall.7.5.4.1700000000000000000.1",  # v2 with a domain
])
def test_delivery_ids_read_the_ack_subject_as_nats_py_does(reply):
    from nats.aio.msg import Msg

    from squall.connectors.nats.pulls import delivery_ids

    md = Msg.Metadata._from_reply(reply)
    assert delivery_ids(reply) == (md.sequence.stream, md.num_delivered)


@pytest.mark.parametrize("reply", ["_INBOX.abc.1", "$JS.ACK.a.b.1.2.3.4.5.6", "$JS.NAK.orders.squall.3.1234.77.1.5"])
def test_delivery_ids_refuse_what_is_not_an_ack_subject(reply):
    from squall.connectors.nats.pulls import delivery_ids

    with pytest.raises(ValueError, match="not a JetStream ack subject"):
        delivery_ids(reply)


def test_the_lean_path_is_taken_only_with_the_internals_it_uses():
    from squall.connectors.nats import wire

    class Client:
        async def _process_msg(self, sid, subject, reply, data, headers): ...
        async def _send_command(self, cmd, priority=False): ...
        async def _flush_pending(self, force_flush=False): ...
        async def _process_headers(self, headers): ...

    class Renamed(Client):
        async def _process_msg(self, sid, subject, reply, payload, headers): ...

    class Missing(Client):
        _send_command = None

    class Subscription:
        _id = 7

    sub = Subscription()
    assert wire.supported(Client(), sub)
    assert not wire.supported(Renamed(), sub) and not wire.supported(Missing(), sub)
    assert not wire.supported(Client(), object())  # a subscription without its sid


def test_a_message_that_reaches_a_deactivated_spout_keeps_its_deliveries(nats_admin):
    """A deactivated spout gives back what its open pull requests still bring once they are over.
    Given back at once, the server handed the message straight back to those requests, and each
    round used one of its deliveries: it was dead-lettered as lost, never having run."""
    stream = nats_admin.source("deact")
    rec = Recorder()
    conf = Config()
    conf.set_message_timeout_secs(30)
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("deact", conf, spout_into(nats_admin.spout(stream, rec, max_retries=3),
                                                           FileSink(os.devnull)))
        wait_until(lambda: nats_admin.consumer(stream).num_waiting > 0, 10, "the spout's pull requests")
        cluster.deactivate("deact")
        nats_admin.publish(stream, [b"late"])
        wait_until(lambda: rec.spouts[0].counters.extra.get("given back", 0) >= 1, 10, "the message given back")
        # given back once the requests open at deactivation expired: given back at once, it ran out meanwhile
        wait_until(lambda: nats_admin.consumer(stream).num_waiting == 0, 10, "the open pull requests to end")
        given_back = rec.spouts[0].counters.extra.get("given back", 0)
        cluster.activate("deact")
        wait_until(lambda: rec.n_acked() == 1 or rec.dead, 30, "the message acked or dead-lettered")
        cluster.kill_topology("deact")
    assert given_back == 1 and not rec.dead and not nats_admin.dead_letters(stream)
    assert rec.acked == {b"late": 1}
