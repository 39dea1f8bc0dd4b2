"""Distributed RPC over Trident, as Storm's `LocalDRPC` and `TridentTopology.newDRPCStream`.

`drpc.execute(function, args)` queues a request and waits. The topology's DRPC spout (on the
driver) takes one request per batch, so an aggregation in a DRPC stream sees one request's
tuples only. The stream's last operation feeds a `ReturnResultsBolt` (one task), which sends
the batch's result rows, as Storm's JSON text, to the driver once the batch's rows are all in
(at the end of the wave). The request is answered when its batch's tuple tree completes
(before the batch's commit, as in Storm): with those rows (when none reached the end: ``"[]"``,
or as Storm the aggregator's zero, e.g. ``"[[0]]"``, when the stream ends with a global
aggregation), or with a `DRPCExecutionException` saying why the batch failed. A function no
running topology serves is refused at once.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from squall.api.components import Bolt
from squall.trident.service import ServiceAddress, call, register, service_address
from squall.trident.spouts import NonTransactionalSpout

__all__ = ["DRPCExecutionException", "DRPCSpout", "LocalDRPC", "ReturnResultsBolt"]

DEFAULT_TIMEOUT_SECS = 60.0
IN_FLIGHT = 16  # DRPC requests (batches) run at once when topology.max.spout.pending does not say
_DRPCS: dict[str, LocalDRPC] = {}  # id -> the LocalDRPC of this (the driver's) process


class DRPCExecutionException(RuntimeError):
    """A DRPC request that cannot be answered: unknown function, failed batch, timeout."""


@dataclass(eq=False)
class _Request:
    function: str
    args: str
    done: threading.Event = field(default_factory=threading.Event)
    result: str | None = None
    error: str | None = None


class LocalDRPC:
    """Storm's LocalDRPC: serves the functions of topologies running in this process.

    Copies of it (the engines copy spouts and bolts) are this same object in this process."""

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._served: dict[str, int] = {}  # function -> running DRPC spouts serving it
        self._queues: dict[str, deque[_Request]] = {}
        self._results: dict[tuple[str, int], tuple[str, str]] = {}  # (function, txid) -> ("ok", JSON) | ("error", why)
        _DRPCS[self.id] = self

    def __deepcopy__(self, memo: dict) -> LocalDRPC:
        return self

    def __reduce__(self) -> tuple:
        return _local_drpc, (self.id,)

    def execute(self, function: str, args: str, timeout_secs: float = DEFAULT_TIMEOUT_SECS) -> str:
        """Runs `function` on `args`; returns the JSON text of the result tuples, e.g. "[[5]]"."""
        if not isinstance(args, str):
            raise TypeError(f"DRPC args are one string, as in Storm; got {type(args).__name__} {args!r}")
        req = _Request(function, args)
        with self._lock:
            if not self._served.get(function):
                known = sorted(f for f, n in self._served.items() if n)
                raise DRPCExecutionException(
                    f"no DRPC function {function!r}: this LocalDRPC serves {known}. Declare it with "
                    f"t.new_drpc_stream({function!r}, drpc) and submit that topology first")
            self._queues.setdefault(function, deque()).append(req)
        if not req.done.wait(timeout_secs):
            with self._lock:
                queue = self._queues.get(function, deque())
                if req in queue:
                    queue.remove(req)
            raise DRPCExecutionException(
                f"DRPC request {function}({args!r}) got no answer in {timeout_secs}s: is its topology running in "
                "running? (a LocalCluster(simulated_time=True, stepped=True) runs only during advance_time/wait_idle)")
        if req.error is not None:
            raise DRPCExecutionException(f"DRPC request {function}({args!r}) failed: {req.error}")
        return req.result

    def shutdown(self) -> None:
        """Fails every waiting request and forgets this LocalDRPC."""
        with self._lock:
            waiting = [r for q in self._queues.values() for r in q]
            self._queues.clear()
        for r in waiting:
            _answer(r, error="the LocalDRPC was shut down")
        _DRPCS.pop(self.id, None)

    # -- the DRPC spout's side (driver) -------------------------------------------------------

    def serve(self, function: str, on: bool) -> None:
        with self._lock:
            self._served[function] = self._served.get(function, 0) + (1 if on else -1)
            if on:
                return
            queue = self._queues.pop(function, deque()) if not self._served[function] else deque()
        for r in queue:
            _answer(r, error="the topology serving this function was killed")

    def take(self, function: str) -> _Request | None:
        with self._lock:
            queue = self._queues.get(function)
            return queue.popleft() if queue else None

    def store_result(self, function: str, txid: int, status: str, text: str) -> None:
        with self._lock:
            self._results[(function, txid)] = (status, text)

    def finish(self, req: _Request, txid: int, error: str | None = None, empty: str = "[]") -> None:
        """Answers `req` (its batch is done, or failed with `error`)."""
        with self._lock:
            status, text = self._results.pop((req.function, txid), ("ok", empty))
        if status == "error":  # the result could not be sent: say why, rather than how the batch ended
            error = text
        _answer(req, result=text if error is None else None, error=error)

    def forget_results(self, function: str) -> None:
        with self._lock:
            for k in [k for k in self._results if k[0] == function]:
                del self._results[k]


def _answer(req: _Request, result: str | None = None, error: str | None = None) -> None:
    req.result, req.error = result, error
    req.done.set()


def _local_drpc(drpc_id: str) -> LocalDRPC | str:
    """Unpickling a LocalDRPC: the object itself in its process, its id elsewhere."""
    return _DRPCS.get(drpc_id, drpc_id)


def _deliver(drpc_id: str, function: str, txid: int, status: str, text: str) -> None:
    drpc = _DRPCS.get(drpc_id)
    if drpc is None:
        raise LookupError(f"no LocalDRPC {drpc_id[:8]} in the driver (shut down?)")
    drpc.store_result(function, txid, status, text)


register("drpc.result", _deliver)


class DRPCSpout(NonTransactionalSpout):
    """One DRPC request per batch; emits its `args`. Runs on the driver, next to the LocalDRPC."""

    def __init__(self, function: str, drpc: LocalDRPC) -> None:
        if not isinstance(drpc, LocalDRPC):
            raise TypeError(f"new_drpc_stream({function!r}, drpc) needs a LocalDRPC, got {type(drpc).__name__}")
        self.function = function
        self.drpc = drpc
        self.empty_result: list[list] = []  # the answer when no tuple reaches the end (set by the compiler)

    def get_output_fields(self) -> list[str]:
        return ["args"]

    def open(self, conf: dict, context: Any) -> None:
        self.requests: dict[int, _Request] = {}
        self.drpc.forget_results(self.function)
        self.drpc.serve(self.function, True)

    def next_batch(self, txid: int) -> list[list] | None:
        req = self.drpc.take(self.function)
        if req is None:
            return None
        self.requests[txid] = req
        return [[req.args]]

    def batch_failed(self, txid: int, reason: Any) -> None:
        req = self.requests.pop(txid, None)
        if req is not None:
            why = str(reason or "the batch failed")
            if getattr(reason, "error", None) is None:
                why += " (the error it reported, if any, is in cluster.get_errors(topology))"
            self.drpc.finish(req, txid, error=why)

    def batch_processed(self, txid: int) -> None:
        """The batch's tree is complete: its results are all in the LocalDRPC (sent before)."""
        req = self.requests.pop(txid, None)
        if req is not None:
            self.drpc.finish(req, txid, empty=json.dumps(self.empty_result, separators=(",", ":"), default=str))

    def close(self) -> None:
        for txid, req in list(self.requests.items()):
            self.drpc.finish(req, txid, error="the topology serving this function was killed")
        self.requests = {}
        self.drpc.serve(self.function, False)


class ReturnResultsBolt(Bolt):
    """Collects each batch's result rows (the DRPC stream's last fields) and sends them, as
    JSON, to the LocalDRPC in the driver when the wave's rows are all in."""

    _settles_inputs = False  # Trident batches settle at their commit, in txid order

    def __init__(self, drpc: LocalDRPC, function: str) -> None:
        self.drpc_id = drpc.id
        self.function = function
        self.home: ServiceAddress | None = None

    def check_engine(self, engine: str, conf: dict) -> None:
        self.home = service_address() if engine != "local" else None

    def declare_output_fields(self, declarer: Any) -> None:
        pass

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        self.c = collector
        self.rows: dict[Any, list[list]] = {}
        self.held: dict[Any, Any] = {}

    def execute(self, t: Any) -> None:
        batch = t.values[0]
        self.rows.setdefault(batch, []).append(list(t.values[1:]))
        if batch in self.held:
            self.c.ack(t)
        else:
            self.held[batch] = t

    def _send(self, txid: int, status: str, text: str) -> None:
        if self.home is None:
            _deliver(self.drpc_id, self.function, txid, status, text)
        else:
            call(self.home, "drpc.result", self.drpc_id, self.function, txid, status, text)

    def finish_wave(self) -> None:
        for batch, rows in self.rows.items():
            held = self.held[batch]
            try:
                try:
                    text = json.dumps(rows, separators=(",", ":"))
                except (TypeError, ValueError) as e:
                    why = TypeError(f"the result of DRPC function {self.function!r} is not JSON: {e}")
                    self.c.report_error(why)
                    self._send(batch[0], "error", f"{type(why).__name__}: {why}")
                    self.c.fail(held)
                    continue
                self._send(batch[0], "ok", text)
            except Exception as e:  # noqa: BLE001 - the driver is unreachable: this request fails
                self.c.report_error(e)
                self.c.fail(held)
                continue
            self.c.ack(held)
        self.rows, self.held = {}, {}
