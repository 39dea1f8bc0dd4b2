"""Unit tests of what the broker connectors share (squall/connectors, no broker needed):
payload schemes, failure records, settings and secrets, the backoff, and the retry and
dead-letter bookkeeping of BrokerSpout and IOThreadBrokerSpout, driven by a fake in-memory
broker (the real brokers run the same bookkeeping in tests/brokers/test_broker_contract.py).
"""

from __future__ import annotations

import json
import os
import pickle
from collections import deque
from typing import Any

import pytest

from squall import Bolt, FailReason, LocalCluster, TopologyBuilder
from squall.connectors.backoff import Backoff
from squall.connectors.dead_letters import (
    DL_ATTEMPTS,
    DL_COMPONENT,
    DL_ERROR,
    DL_REASON,
    DL_SOURCE,
    DL_SOURCE_ID,
    DL_TASK,
    Failure,
    dead_letter_info,
    one_line,
)
from squall.connectors.io_thread import ACKED, DEAD, EMIT_CHUNK, IOThreadBrokerSpout
from squall.connectors.schemes import DecodeError, Scheme
from squall.connectors.settings import (
    Secret,
    describe_error,
    env_first,
    redact_url,
    scrub,
    url_password,
    url_with_password,
)
from squall.connectors.spout import BrokerSpout, Message
from squall.engine.tasks.spout_task import SpoutTask, settles_acks_in_batches
from tests.support.broker_services import wait_until
from tests.support.broker_topology import FileSink

# -- schemes, failure records, settings -------------------------------------------------------


def test_schemes_decode_or_say_why():
    assert Scheme("string").decode("é".encode()) == "é"
    assert Scheme("json").decode(b'{"a": [1, 2]}') == {"a": [1, 2]}
    assert Scheme("bytes").decode(b"\x80\x81") == b"\x80\x81"
    with pytest.raises(DecodeError, match=r"not valid UTF-8 \(invalid start byte at byte 0\)"):
        Scheme("string").decode(b"\xff")
    with pytest.raises(DecodeError, match=r"not valid JSON \(Expecting value at line 1 column 1\)"):
        Scheme("json").decode(b"nope")

    def fussy(b):
        return {}["x"]

    with pytest.raises(DecodeError, match=r"scheme fussy cannot decode payload \(KeyError: 'x'\): b'xxx") as ei:
        Scheme(fussy).decode(b"x" * 100)
    assert str(ei.value).endswith("...")  # a preview of the payload, not all of it
    with pytest.raises(ValueError, match="unknown scheme 'pickle'"):
        Scheme("pickle")


def test_a_batch_decodes_in_one_pass_and_a_bad_payload_still_says_why():
    """Connectors decode a poll at once (`decode_many`); one payload that does not decode sends
    the batch through `decode` one by one, so that one gets its reason and the others their value."""
    assert Scheme("json").decode_all([b'{"a": 1}', b"[2]"]) == [{"a": 1}, [2]]
    assert Scheme("string").decode_all(["é".encode()]) == ["é"]
    assert Scheme("bytes").decode_all([bytearray(b"\x80")]) == [b"\x80"]
    for name, bad in (("json", b"nope"), ("json", None), ("string", b"\xff"), ("bytes", None)):
        assert Scheme(name).decode_all([b'"ok"', bad]) is None, name
    assert Scheme(lambda b: b).decode_all([b"x"]) is None  # a user's scheme: one by one, its errors its own
    spout = BrokerSpout(scheme="json")
    ms = [Message(i, body) for i, body in enumerate([b"1", b"nope", None, b"[3]"])]
    spout.decode_many(ms)
    assert [(m.value, m.decoded) for m in ms] == [(1, True), (None, True), (None, True), ([3], True)]
    assert ms[0].error is None and ms[3].error is None
    assert "not valid JSON" in ms[1].error and ms[2].error == "message has no payload"


def test_failure_records_and_dead_letter_metadata():
    f = Failure.from_reason(FailReason("error", "parse", 3, "ValueError: bad\nline two"), 4)
    fields = f.fields("q", 17)
    assert fields[DL_ERROR] == "ValueError: bad | line two" and fields[DL_COMPONENT] == "parse"
    assert (fields[DL_REASON], fields[DL_ATTEMPTS], fields[DL_TASK]) == ("error", "4", "3")
    assert (fields[DL_SOURCE], fields[DL_SOURCE_ID]) == ("q", "17")
    assert str(f) == "error in parse[3] after 4 attempt(s): ValueError: bad\nline two"
    plain = Failure.from_reason(None, 1)
    assert plain.kind == "failed" and DL_ERROR not in plain.fields("q", 1) and DL_COMPONENT not in plain.fields("q", 1)
    assert len(one_line("x" * 5000)) == 2000 and one_line("a\x00b\n\n c") == "a?b | c"
    headers = {b"squall-reason": b"decode", "Squall-Attempts": 1, "content-type": "json"}
    assert dead_letter_info(headers) == {"squall-reason": "decode", "squall-attempts": "1"}


def test_secrets_never_show_and_urls_are_redacted(monkeypatch):
    s = Secret("hunter2")
    assert repr(s) == str(s) == "'***'" and s.reveal() == "hunter2" and s and not Secret(None)
    assert s == Secret("hunter2") and s != Secret("other") and len({s, Secret("hunter2")}) == 1
    assert redact_url("amqp://u:p%40ss@h:5672/v") == "amqp://u:***@h:5672/v"
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"
    assert redact_url("nats://a:1,nats://tok@b:2") == "nats://a:1,nats://***@b:2"
    assert url_password("amqp://u:p%40ss@h/v") == "p@ss" and url_password("redis://h:1/0") is None
    assert url_with_password("amqp://carol@h:1/v", "s3/cret") == "amqp://carol:s3%2Fcret@h:1/v"
    assert scrub("auth failed for p@ss and p%40ss", ["p@ss"]) == "auth failed for *** and ***"
    assert describe_error(OSError("no route to u:hunter2@h"), [s]) == "OSError: no route to u:***@h"
    assert describe_error(TimeoutError()) == "TimeoutError"
    monkeypatch.delenv("SQUALL_T_A", raising=False)
    monkeypatch.setenv("SQUALL_T_B", "")
    monkeypatch.setenv("SQUALL_T_C", "c")
    assert env_first("SQUALL_T_A", "SQUALL_T_B", "SQUALL_T_C") == "c"
    assert env_first("SQUALL_T_A", default="d") == "d"


def test_backoff_doubles_up_to_its_cap_and_starts_again_after_a_success():
    b = Backoff(0.2, 1.0)
    assert [b.next() for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    assert b.reset() is True  # there were failures: the caller counts a reconnect
    assert b.next() == 0.2
    b.reset()
    assert b.reset() is False
    with pytest.raises(ValueError):
        Backoff(0, 1)


def test_the_old_base_module_still_exports_the_shared_names():
    from squall.connectors import base

    assert base.Scheme is Scheme and base.Failure is Failure and base.Secret is Secret
    assert base.BrokerSpout is BrokerSpout and base.IOThreadBrokerSpout is IOThreadBrokerSpout
    assert base.dead_letter_info is dead_letter_info and base.redact_url is redact_url


# -- the retry and dead-letter bookkeeping, with a fake in-memory broker --------------------------


class MemoryQueue:
    """A broker queue in memory: messages waiting (id, body, attempts, failures), and what became
    of the others. Shared by the test and the spout copy the cluster runs."""

    def __init__(self, bodies: list[bytes]):
        self.ready: deque = deque((i, body, 1, 0) for i, body in enumerate(bodies))
        self.acked: list[Any] = []
        self.dead: list[tuple[Any, Failure]] = []
        self.refuse_connects = 0  # the next this many connects fail
        self.drop_after_acks: int | None = None  # the connection drops once this many were acked
        self.refuse_after_drop = 0  # ... and then refuses this many reconnects

    def __deepcopy__(self, memo: dict) -> MemoryQueue:
        return self


class MemoryQueueSpout(BrokerSpout):
    """BrokerSpout over a MemoryQueue, all on the spout's thread."""

    def __init__(self, queue: MemoryQueue, **kw: Any):
        super().__init__(**kw)
        self.queue = queue

    def _connect(self) -> None:
        pass

    def _disconnect(self) -> None:
        pass

    def _next_message(self) -> Message | None:
        if not self.queue.ready:
            return None
        mid, body, attempts, failures = self.queue.ready.popleft()
        return Message(mid, body, attempts, failures=failures)

    def _ack_message(self, m: Message) -> None:
        self.queue.acked.append(m.id)
        self._acked(m)

    def _retry_message(self, m: Message, failure: Failure) -> None:
        self.queue.ready.append((m.id, m.body, m.attempts + 1, m.failures))

    def _dead_letter(self, m: Message, failure: Failure) -> None:
        self.queue.dead.append((m.id, failure))
        self._dead_lettered(m, failure)


class MemoryIOSpout(IOThreadBrokerSpout):
    """IOThreadBrokerSpout over a MemoryQueue: the I/O thread moves messages and runs actions."""

    broker_name = "Memory"
    url = "memory://queue"

    def __init__(self, queue: MemoryQueue, **kw: Any):
        super().__init__(**kw)
        self.queue = queue

    def _connect(self) -> None:
        self._start_io(10)

    def _disconnect(self) -> None:
        self._stop_io(10)

    def _io_connect(self) -> None:
        if self.queue.refuse_connects:
            self.queue.refuse_connects -= 1
            raise ConnectionRefusedError("memory queue refused the connection")

    def _io_serve(self) -> None:
        q = self.queue
        while not self._closing:
            self._run_actions()
            if q.drop_after_acks is not None and len(q.acked) >= q.drop_after_acks:
                q.drop_after_acks = None
                q.refuse_connects = q.refuse_after_drop
                raise ConnectionResetError("memory queue dropped the connection")
            while q.ready and len(self._inflight) + len(self._incoming) < self._prefetch():
                mid, body, attempts, failures = q.ready.popleft()
                m = Message(mid, body, attempts, failures=failures)
                self.decode(m)
                self._incoming.append(m)
            self._stop.wait(0.001)
        self._run_actions()

    def _run_actions(self) -> None:
        q = self.queue
        while self._actions:
            kind, m, failure = self._actions.popleft()
            if kind == "ack":
                q.acked.append(m.id)
                self._done.append((ACKED, m, None))
            elif kind == self.RETRY_ACTION:
                q.ready.append((m.id, m.body, m.attempts + 1, m.failures))
            else:
                q.dead.append((m.id, failure))
                self._done.append((DEAD, m, failure))

    def _io_close(self) -> None:
        pass


class Parse(Bolt):
    """[message, meta] -> [id]: raises for the poison message, fails a "flaky" one's first attempt."""

    def prepare(self, conf, context, collector):
        self.c = collector

    def declare_output_fields(self, d):
        d.declare(["id"])

    def execute(self, t):
        msg, meta = t[0], t[1]
        if msg.get("poison"):
            raise ValueError("poison")
        if msg.get("flaky") and meta["attempts"] == 1:
            self.c.fail(t)
            return
        self.c.emit([msg["id"]], anchors=t)
        self.c.ack(t)


MAX_RETRIES = 2
BODIES = [b'{"id": 0}', b'{"id": 1, "flaky": true}', b'{"id": "p", "poison": true}', b"{not json", b'{"id": 2}']


def check_bookkeeping(queue: MemoryQueue, spout: BrokerSpout, seen: list) -> None:
    """What BODIES must come to with MAX_RETRIES: 0, 1 (on its 2nd attempt) and 2 acked once;
    the poison message dead-lettered after MAX_RETRIES + 1 attempts with its error; the bad JSON
    dead-lettered at once, never emitted."""
    assert sorted(queue.acked) == [0, 1, 4] and sorted(seen) == [0, 1, 2]  # queue ids: positions in BODIES
    dead = dict(queue.dead)
    assert set(dead) == {2, 3}
    assert (dead[2].kind, dead[2].component, dead[2].attempts) == ("error", "parse", MAX_RETRIES + 1)
    assert "ValueError: poison" in dead[2].error
    assert (dead[3].kind, dead[3].attempts) == ("decode", 1) and "not valid JSON" in dead[3].error
    c = spout.counters
    assert (c.emitted, c.acked, c.dead_lettered, c.decode_errors) == (3 + 1 + MAX_RETRIES + 1, 3, 2, 1)
    assert c.failed == c.retried + 1 == 1 + MAX_RETRIES + 1  # the last failure of the poison is not retried
    assert spout.inflight == 0


def run_topology(spout: BrokerSpout, simulated: bool) -> tuple[list, BrokerSpout]:
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("parse", Parse()).shuffle_grouping("src")
    with LocalCluster(engine="local", simulated_time=simulated, capture=True) as cluster:
        cluster.submit_topology("mem", {"squall.max.replays": MAX_RETRIES}, b.create_topology())
        coord = cluster.coordinator("mem")
        running = coord.spouts[0].spout
        if simulated:
            cluster.wait_idle(30)
        else:
            wait_until(lambda: len(spout.queue.acked) == 3 and len(spout.queue.dead) == 2, 20,
                       lambda: f"acked {spout.queue.acked}, dead {spout.queue.dead}")
        seen = [v[0] for vals in coord.captured["parse"]["default"].values() for v in vals]
        cluster.kill_topology("mem")
    return seen, running


def test_retries_then_dead_letters_on_the_spouts_thread():
    queue = MemoryQueue(BODIES)
    seen, spout = run_topology(MemoryQueueSpout(queue, scheme="json", meta_field="meta"), simulated=True)
    check_bookkeeping(queue, spout, seen)


def test_retries_then_dead_letters_through_the_io_thread_handoff():
    queue = MemoryQueue(BODIES)
    seen, spout = run_topology(MemoryIOSpout(queue, scheme="json", meta_field="meta"), simulated=False)
    check_bookkeeping(queue, spout, seen)
    assert not spout._actions and not spout._done  # everything handed over was done and drained


class Forgetful(MemoryQueueSpout):
    """A broker that forgets a message's failures when it comes back (as one taken over after a
    crash may): only its deliveries are counted."""

    def _retry_message(self, m: Message, failure: Failure) -> None:
        self.queue.ready.append((m.id, m.body, m.attempts + 1, 0))


def test_failures_and_deliveries_bound_a_message_apart():
    """Failures of kind "lost" (the wave died) use no retry; other failures do; and deliveries
    bound every message, also one whose failures the broker forgot."""
    spout = Forgetful(MemoryQueue([b"lost", b"failed"]), max_retries=1, max_deliveries=4)
    spout.open({}, None, None)
    spout._collector = Emits()
    for _ in range(8):
        spout.next_tuple()
        for m in list(spout._inflight.values()):
            spout.fail(m.id, reason=FailReason("lost" if m.body == b"lost" else "failed"))
    dead = dict(spout.queue.dead)
    assert (dead[0].kind, dead[0].attempts) == ("lost", 4) and (dead[1].kind, dead[1].attempts) == ("failed", 4)
    assert spout.counters.retried == 6 and not spout.queue.ready


def test_an_ack_or_fail_of_an_unknown_message_is_counted_stale():
    spout = MemoryQueueSpout(MemoryQueue([]))
    spout.open({}, None, None)
    spout.ack("gone")
    spout.fail("gone", reason=FailReason("timeout"))
    assert spout.counters.stale == 2 and spout.counters.acked == spout.counters.failed == 0


def test_an_io_thread_that_cannot_connect_fails_open_with_its_error():
    queue = MemoryQueue([b"x"])
    queue.refuse_connects = 1
    spout = MemoryIOSpout(queue)
    with pytest.raises(ConnectionRefusedError, match="refused the connection"):
        spout.open({}, None, None)
    assert spout._thread is None and queue.refuse_connects == 0


def test_a_lost_connection_is_reported_and_reconnected_with_a_backoff():
    """The connection drops once, the first reconnect fails: both are reported (as errors of the
    spout, on the topology's thread), the spout reconnects and every message is acked."""
    queue = MemoryQueue([json.dumps({"id": i}).encode() for i in range(20)])
    queue.drop_after_acks = 5
    queue.refuse_after_drop = 1
    b = TopologyBuilder()
    b.set_spout("src", MemoryIOSpout(queue, scheme="json"))
    b.set_bolt("ack", FileSink(os.devnull)).shuffle_grouping("src")
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("mem", {"topology.max.spout.pending": 2}, b.create_topology())  # acks come 2 by 2
        spout = cluster.coordinator("mem").spouts[0].spout
        wait_until(lambda: spout.counters.acked == 20, 20, lambda: f"acked {queue.acked}, {spout.counters}")
        errors = [e.error for e in cluster.get_errors("mem") if e.component == "src"]
        cluster.kill_topology("mem")
    assert spout.counters.reconnects == 1 and sorted(queue.acked) == list(range(20))
    assert any("Memory connection to memory://queue lost (ConnectionResetError: memory queue dropped" in e
               for e in errors), errors
    assert any("cannot reconnect to Memory at memory://queue: ConnectionRefusedError: memory queue refused the "
               "connection; next try in 0.4s" in e for e in errors), errors  # 0.2 s after the loss, then doubled


class Emits:
    """A spout collector that only records what was emitted."""

    def __init__(self) -> None:
        self.msg_ids: list = []

    def emit(self, values: list, msg_id: Any = None, stream: str = "default") -> list[int]:
        self.msg_ids.append(msg_id)
        return []


def opened(spout: BrokerSpout, n: int) -> Emits:
    emits = Emits()
    spout.open({}, None, emits)
    for _ in range(n):
        spout.next_tuple()
    assert len(emits.msg_ids) == n
    return emits


def test_a_waves_acks_go_to_the_broker_side_at_once_and_unknown_ones_are_counted_stale():
    queue = MemoryQueue([b"a", b"b", b"c"])
    spout = MemoryQueueSpout(queue)
    emits = opened(spout, 3)
    spout.ack_batch([*emits.msg_ids, "gone"])
    assert queue.acked == [0, 1, 2] and spout.counters.acked == 3 and spout.counters.stale == 1
    assert spout.inflight == 0


class WakeCounting(MemoryIOSpout):
    """The I/O thread is not started: the test sees what is handed over, and how often it is woken."""

    def _connect(self) -> None:
        self.queued_at_wake: list[int] = []

    def _wake(self) -> bool:
        self.queued_at_wake.append(len(self._actions))
        return True


def test_an_io_thread_spout_gets_a_waves_acks_in_one_hand_over():
    spout = WakeCounting(MemoryQueue([]))
    spout.open({}, None, Emits())
    for i in range(3):
        spout._incoming.append(Message(i, b"x", 1))
        spout.next_tuple()
    spout.ack_batch([0, 1, 2])
    assert [(kind, m.id) for kind, m, _ in spout._actions] == [("ack", 0), ("ack", 1), ("ack", 2)]
    assert spout.queued_at_wake == [3] and spout.inflight == 0  # woken once, with all three queued


def test_an_io_thread_spout_takes_what_was_received_in_order_and_dead_letters_what_does_not_decode():
    """The I/O thread decodes; the spout takes what waits in one go, and when one of it did not
    decode, the rest still goes out in order and that one is dead-lettered (reason decode)."""
    spout = WakeCounting(MemoryQueue([]), scheme="json")
    spout.open({}, None, Emits())
    for i, body in enumerate([b'{"n": 0}', b"{not json", b'{"n": 2}', b'{"n": 3}', b'{"n": 4}']):
        m = Message(i, body, 1)
        spout.decode(m)
        spout._incoming.append(m)
    assert [m.id for m in spout._take_decoded(3)] == [0, 2, 3]
    assert [(kind, m.id, f.kind) for kind, m, f in spout._actions] == [(spout.DEAD_ACTION, 1, "decode")]
    assert [m.id for m in spout._take_decoded(3)] == [4] and spout.counters.decode_errors == 1


def test_an_io_thread_spout_counts_a_batch_of_acks_handed_back_as_one():
    acked: list[Any] = []

    class Hooked(WakeCounting):
        def on_acked(self, message: Message) -> None:
            acked.append(message.id)

    for kind in (WakeCounting, Hooked):
        spout = kind(MemoryQueue([]))
        spout.open({}, None, Emits())
        spout._done.extend([(ACKED, [Message(0, b"a"), Message(1, b"b")], None), (ACKED, Message(2, b"c"), None)])
        spout.next_tuple()
        assert spout.counters.acked == 3
    assert acked == [0, 1, 2]


def test_a_subclass_that_overrides_ack_sees_each_ack_of_a_batch():
    class Audited(MemoryQueueSpout):
        def ack(self, msg_id: Any) -> None:
            self.audit.append(msg_id)
            super().ack(msg_id)

    assert settles_acks_in_batches(MemoryQueueSpout) and settles_acks_in_batches(MemoryIOSpout)
    assert not settles_acks_in_batches(Audited)
    queue = MemoryQueue([b"a", b"b"])
    spout = Audited(queue)
    spout.audit = []
    b = TopologyBuilder()
    b.set_spout("src", spout)
    b.set_bolt("parse", Parse()).shuffle_grouping("src")
    task = SpoutTask(b.create_topology(), "src", 0, {}, spout)  # the engine's side of a spout
    emits = opened(spout, 2)
    assert task.ack(emits.msg_ids) == []
    assert spout.audit == emits.msg_ids and queue.acked == [0, 1]


class Raising(Emits):
    """A collector whose third emit raises."""

    def emit(self, values: list, msg_id: Any = None, stream: str = "default") -> list[int]:
        if len(self.msg_ids) == 2:
            self.msg_ids.append(None)
            raise ValueError("emit refused")
        return super().emit(values, msg_id, stream)


def test_an_io_thread_spout_emits_what_waits_in_chunks_and_keeps_what_an_emit_left():
    spout = WakeCounting(MemoryQueue([]))
    emits = Emits()
    spout.open({}, None, emits)
    spout._incoming.extend(Message(i, b"x", 1) for i in range(EMIT_CHUNK + 6))
    spout.next_tuple()
    assert emits.msg_ids == list(range(EMIT_CHUNK)) and spout.counters.emitted == EMIT_CHUNK
    spout.next_tuple()
    assert emits.msg_ids == list(range(EMIT_CHUNK + 6)) and spout.inflight == EMIT_CHUNK + 6

    spout = WakeCounting(MemoryQueue([]))
    spout.open({}, None, Raising())
    spout._incoming.extend(Message(i, b"x", 1) for i in range(6))
    with pytest.raises(ValueError, match="emit refused"):
        spout.next_tuple()
    assert spout.counters.emitted == 2 and [m.id for m in spout._incoming] == [3, 4, 5]


class Recorded:
    """A value that notes when it is pickled."""

    pickled = 0

    def __reduce__(self) -> tuple:
        Recorded.pickled += 1
        return (Recorded, ())


def test_an_open_io_thread_spout_refuses_to_pickle_at_once():
    """Shipped to its slot before open, a broker spout pickles; open, it holds a connection and a
    thread and refuses before pickling its messages in flight (a snapshot tries every wave)."""
    spout = WakeCounting(MemoryQueue([]))
    assert pickle.loads(pickle.dumps(spout)).queue.ready == deque()
    spout.open({}, None, Emits())
    spout._incoming.append(Message(0, b"x", 1, handle=Recorded()))
    spout.next_tuple()
    with pytest.raises(TypeError, match="open WakeCounting holds a live Memory connection"):
        pickle.dumps(spout)
    assert Recorded.pickled == 0


def test_an_io_thread_spout_drops_what_is_no_longer_current_on_both_paths():
    """Messages of a lost connection or a revoked partition are never emitted, whether what waits
    all decoded (taken in one go) or not (taken one by one), and are counted."""

    class Current(WakeCounting):
        def _current(self, m: Message) -> bool:
            return m.handle == "live"

        def _dropped(self, n: int) -> None:
            self.counters.stale += n

    for bodies in ([b"1", b"2", b"3", b"4"], [b"1", b"2", b"{bad", b"4"]):
        spout = Current(MemoryQueue([]), scheme="json")
        emits = Emits()
        spout.open({}, None, emits)
        for i, body in enumerate(bodies):
            m = Message(i, body, 1, handle="live" if i % 2 == 0 else "gone")
            spout.decode(m)
            spout._incoming.append(m)
        spout.next_tuple()
        assert emits.msg_ids == [0] + ([2] if b"{bad" not in bodies else [])
        assert spout.counters.stale == 2 and not spout._incoming
