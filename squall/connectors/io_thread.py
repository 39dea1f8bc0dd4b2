"""IOThreadBrokerSpout: the model every broker spout follows. Broker I/O never runs on the thread
that runs the topology's waves: a background I/O thread owns the client, receives and decodes
messages into `_incoming`, and performs the acks, retries and dead letters that the spout's
ack/fail hand it as actions. What it has finished comes back through `_done` and is applied
(counters, hooks, error reports) on the spout's own thread.

For a client that is a plain blocking library (pika, redis-py) this module also runs the thread
itself: connect, serve until the connection is lost, reconnect after a backoff, until closed.
An asyncio client (nats-py) runs in an event loop thread of its own and only uses the handoff.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from squall.connectors.backoff import Backoff
from squall.connectors.dead_letters import Failure
from squall.connectors.spout import BrokerSpout, Message

# What the I/O thread hands back, in `_done`: (kind, message or text, failure); ACKED may carry a
# list of messages
ACKED, DEAD, STALE, RECONNECTED, REPORT = "acked", "dead", "stale", "reconnected", "report"
EMIT_CHUNK = 64  # messages one next_tuple call emits, at most


class IOThreadBrokerSpout(BrokerSpout):
    """A BrokerSpout whose broker client lives in an I/O thread of its own: acks, retries and
    dead letters are queued as actions (`_act`, run by that thread), and what the thread has
    finished comes back through the `_done` deque, drained on the spout's own thread.

    A subclass implements `_wake()` (schedule a run of the actions on the I/O thread, if it can
    be reached) and either runs its own thread or implements `_io_connect()`, `_io_serve()` and
    `_io_close()` and calls `_start_io()` from `_connect()`.
    """

    RETRY_ACTION = "retry"  # the action names the subclass's I/O thread understands
    DEAD_ACTION = "dead"
    broker_name = "the broker"  # for messages: "cannot reconnect to RabbitMQ at ..."

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self._incoming: deque[Message] = deque()  # received and decoded, not yet emitted (filled by the I/O thread)
        self._actions: deque[tuple] = deque()  # (kind, message, failure) for the I/O thread
        self._done: deque[tuple] = deque()  # (kind, message or text, failure) the I/O thread finished
        self._scheduled = False  # a run of the actions is scheduled on the I/O thread
        self._active = True
        self._closing = False
        self._thread: threading.Thread | None = None
        super().open(conf, context, collector)

    def __getstate__(self) -> dict:
        """An unopened spout pickles (it is shipped to its slot); an open one refuses at once. Its
        thread and connection cannot pickle anyway, and a slot's snapshot tries every wave while
        its acks wait for one: failing only after pickling every message in flight would cost
        each wave as much as its tasks' work."""
        if "_actions" in self.__dict__:
            raise TypeError(f"an open {type(self).__name__} holds a live {self.broker_name} connection and "
                            f"thread: it is not snapshotted (opened anew if its slot dies)")
        return self.__dict__

    # -- the spout's side -------------------------------------------------------------------

    def next_tuple(self) -> None:
        """Emit what the I/O thread has received, up to EMIT_CHUNK messages: a call may emit
        several, as in Storm, and the engine's cost of a call is then shared by them. It never
        takes max spout pending past its bound: a spout may hold more received than that."""
        if self._done:
            self._finish_done()
        taken = self._take_decoded(self._emit_room(EMIT_CHUNK))
        if not taken:
            return
        now = time.monotonic()
        inflight, emit, values = self._inflight, self._collector.emit, self._values
        emitted = 0
        try:
            for m in taken:
                m.emitted_at = m.touched_at = now
                inflight[m.id] = m
                emit(values(m), msg_id=m.id)
                emitted += 1
        finally:
            self.counters.emitted += emitted
            self._incoming.extendleft(reversed(taken[emitted + 1:]))  # an emit raised: the rest wait

    def ack(self, msg_id: Any) -> None:
        if self._done:
            self._finish_done()
        super().ack(msg_id)

    def ack_batch(self, msg_ids: list) -> None:
        if self._done:
            self._finish_done()
        super().ack_batch(msg_ids)

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        if self._done:
            self._finish_done()
        super().fail(msg_id, reason=reason)

    def close(self) -> None:
        super().close()  # the I/O thread is stopped, its last actions done
        self._finish_done()

    def _current(self, m: Message) -> bool:
        """Whether a received message is still this spout's to emit (not one of a lost connection
        or a revoked partition); a subclass that drops some says so, and counts them in
        `_dropped`."""
        return True

    def _dropped(self, n: int) -> None:
        """`n` received messages were not `_current`: count them."""

    def _next_message(self) -> Message | None:
        while True:
            try:
                m = self._incoming.popleft()
            except IndexError:
                return None
            if self._current(m):
                return m
            self._dropped(1)

    def _take_decoded(self, room: int) -> list[Message]:
        """BrokerSpout's, with no Python call per message while all that was received decoded
        (the I/O thread decodes) and is current: what is waiting, up to `room`, in one go."""
        if type(self)._next_message is not IOThreadBrokerSpout._next_message:
            return super()._take_decoded(room)
        incoming = self._incoming
        popleft = incoming.popleft
        taken: list[Message] = []
        take = taken.append
        try:
            for _ in range(min(room, len(incoming))):
                take(popleft())
        except IndexError:  # emptied meanwhile (a close on the I/O thread)
            pass
        if type(self)._current is not IOThreadBrokerSpout._current:
            kept = [m for m in taken if self._current(m)]
            if len(kept) < len(taken):
                self._dropped(len(taken) - len(kept))
                taken = kept
        if all([m.decoded and m.error is None for m in taken]):
            return taken
        incoming.extendleft(reversed(taken))  # one does not decode: dead-letter it as BrokerSpout does
        return super()._take_decoded(room)

    def _ack_message(self, m: Message) -> None:
        self._ack_messages([m])

    def _retry_message(self, m: Message, failure: Failure) -> None:
        self._act((self.RETRY_ACTION, m, failure))

    def _dead_letter(self, m: Message, failure: Failure) -> None:
        self._act((self.DEAD_ACTION, m, failure))

    def _ack_messages(self, ms: list[Message]) -> None:
        self._actions.extend([("ack", m, None) for m in ms])
        self._schedule()

    def _act(self, item: tuple) -> None:
        self._actions.append(item)
        self._schedule()

    def _schedule(self) -> None:
        """Have the I/O thread run the queued actions (once, however many were queued)."""
        if self._scheduled:
            return
        self._scheduled = True  # before waking: the I/O thread clears it when it runs the actions
        if not self._wake():
            self._scheduled = False

    def _wake(self) -> bool:
        """Schedule a run of the actions on the I/O thread; False when it cannot be reached now
        (it runs them on its own, e.g. once reconnected, or because it polls)."""
        return False

    def _finish_done(self) -> None:
        done = self._done
        while done:
            self._finish_one(*done.popleft())

    def _finish_one(self, kind: str, m: Any, failure: Any) -> None:
        """Apply one thing the I/O thread finished (on the spout's own thread)."""
        if kind == ACKED and type(m) is list:
            self._acked_many(m)
        elif kind == ACKED:
            self._acked(m)
        elif kind == DEAD:
            self._dead_lettered(m, failure)
        elif kind == STALE:
            self.counters.stale += 1
        elif kind == RECONNECTED:
            self.counters.reconnects += 1
        else:  # REPORT: m is the text
            self._report(m)

    # -- a plain I/O thread: connect, serve, reconnect with a backoff ---------------------------

    def _start_io(self, timeout: float) -> None:
        """Start the I/O thread and wait until its first connection is made: an open that cannot
        connect fails here, in open(), with the error the thread met."""
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._open_error: BaseException | None = None
        self._thread = threading.Thread(target=self._io_main, daemon=True,
                                        name=f"squall-{self.broker_name.lower()}-{self.component_id}-{self.task_index}")
        self._thread.start()
        self._ready.wait(timeout)
        if self._open_error is not None or not self._ready.is_set():
            self._stop_io(timeout)
            raise self._open_error or TimeoutError(f"no answer within {timeout:g}s")

    def _stop_io(self, timeout: float) -> None:
        """Stop the I/O thread; it does the actions handed over so far before it closes."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._closing = True
        self._stop.set()
        self._wake()
        thread.join(timeout)

    def _io_main(self) -> None:
        backoff = Backoff()
        first = True
        while not self._closing:
            try:
                self._io_connect()
            except Exception as e:  # noqa: BLE001 - at open: open fails; later: report, back off, retry
                if first:
                    self._open_error = e
                    self._ready.set()
                    return
                delay = backoff.next()
                self._done.append((REPORT, f"cannot reconnect to {self.broker_name} at {self.url}: "
                                           f"{self._error_text(e)}; next try in {delay:.1f}s", None))
                self._stop.wait(delay)
                continue
            if first:
                first = False
                self._ready.set()
            else:
                self._done.append((RECONNECTED, None, None))
            backoff.reset()
            try:
                self._io_serve()
            except Exception as e:  # noqa: BLE001 - the connection is gone (or broken): reconnect
                if not self._closing:
                    self._io_lost(e)
                    self._stop.wait(backoff.next())
            finally:
                self._io_close()

    def _io_connect(self) -> None:
        """Connect (and declare what the spout needs); on the I/O thread."""
        raise NotImplementedError

    def _io_serve(self) -> None:
        """Receive messages and run the actions until `_closing`, then run the last actions;
        raise when the connection is lost."""
        raise NotImplementedError

    def _io_close(self) -> None:
        """Close the connection, quietly (it may be broken already)."""
        raise NotImplementedError

    def _io_lost(self, error: BaseException) -> None:
        """The connection failed while serving: say so (the thread reconnects after a backoff)."""
        self._done.append((REPORT, f"{self.broker_name} connection to {self.url} lost "
                                   f"({self._error_text(error)}); reconnecting", None))
