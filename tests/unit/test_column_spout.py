"""ColumnSpoutMixin's own logic over an in-memory queue (the brokers' column spouts run against
the real brokers in tests/brokers/test_broker_columns.py)."""

from __future__ import annotations

from types import SimpleNamespace

from squall.connectors.column_spout import ColumnSpoutMixin
from squall.connectors.io_thread import IOThreadBrokerSpout
from squall.connectors.spout import MAX_BAD_PER_CALL, Message


class QueueSpout(IOThreadBrokerSpout):
    """A broker spout whose "broker" is its incoming deque; actions are only recorded."""

    def _connect(self) -> None:
        pass

    def _disconnect(self) -> None:
        pass


class QueueColumns(ColumnSpoutMixin, QueueSpout):
    pass


class Batches:
    def __init__(self) -> None:
        self.batches: list = []
        self.errors: list = []

    def emit_batch(self, columns, msg_ids=None, stream="default"):
        self.batches.append((columns, list(msg_ids)))

    def report_error(self, error):
        self.errors.append(error)


def opened(max_pending: int | None, bodies: list[bytes], **kw) -> tuple[QueueColumns, Batches]:
    spout, out = QueueColumns(**kw), Batches()
    conf = {"topology.max.spout.pending": max_pending} if max_pending else {}
    spout.open(conf, SimpleNamespace(this_task_index=0, this_component_id="src"), out)
    spout._incoming.extend(Message(i, b) for i, b in enumerate(bodies))
    return spout, out


def test_a_call_emits_what_max_pending_leaves_room_for_as_one_batch():
    spout, out = opened(5, [b"m%d" % i for i in range(20)])
    spout.next_tuple()
    spout.next_tuple()  # nothing more: 5 pending
    [(columns, ids)] = out.batches
    assert columns.column("value").to_pylist() == ["m0", "m1", "m2", "m3", "m4"] and ids == [0, 1, 2, 3, 4]
    spout.ack_batch([1, 3])
    spout.next_tuple()
    assert out.batches[-1][1] == [5, 6] and spout.inflight == 5 and spout.counters.emitted == 7
    assert [a[0] for a in spout._actions] == ["ack", "ack"]


def test_payloads_that_are_not_utf8_are_dead_lettered_not_emitted():
    """Checked a batch at a time: the bad rows go to the dead letters with the scheme's reason,
    the good ones out, in their order."""
    spout, out = opened(None, [b"ok0", b"\xff bad", b"ok1", b"\xfe", b"ok2"])
    spout.next_tuple()
    [(columns, ids)] = out.batches
    assert columns.column("value").to_pylist() == ["ok0", "ok1", "ok2"] and ids == [0, 2, 4]
    dead = [a for a in spout._actions if a[0] == QueueSpout.DEAD_ACTION]
    assert [a[1].id for a in dead] == [1, 3] and {a[2].kind for a in dead} == {"decode"}
    assert "not valid UTF-8" in dead[0][2].error and spout.counters.decode_errors == 2
    assert spout.inflight == 3 and spout.counters.emitted == 3


def test_a_batch_of_nothing_but_bad_payloads_emits_nothing():
    spout, out = opened(None, [b"\xff", b"\xfe"])
    spout.next_tuple()
    assert not out.batches and spout.counters.decode_errors == 2 and spout.inflight == 0


def test_messages_without_a_payload_are_dead_lettered_at_most_max_bad_per_call_a_call():
    spout, out = opened(None, [b"ok0"] + [None] * (MAX_BAD_PER_CALL + 5) + [b"ok1"])
    spout.next_tuple()
    assert out.batches[0][0].column("value").to_pylist() == ["ok0"]
    spout.next_tuple()
    assert [c.column("value").to_pylist() for c, _ in out.batches[1:]] == [["ok1"]]
    dead = [a for a in spout._actions if a[0] == QueueSpout.DEAD_ACTION]
    assert len(dead) == MAX_BAD_PER_CALL + 5 and {a[2].kind for a in dead} == {"decode"}


def test_bytes_scheme_gives_a_binary_column_under_the_declared_name():
    spout, out = opened(None, [b"\xff\x00", b"x"], scheme="bytes", fields=("body",))
    spout.next_tuple()
    [(columns, _ids)] = out.batches
    assert columns.schema.names == ["body"] and columns.column("body").to_pylist() == [b"\xff\x00", b"x"]
