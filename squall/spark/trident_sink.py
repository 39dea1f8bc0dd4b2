"""`TridentSink`: a Trident topology as the `foreachBatch` sink of a Structured Streaming query,
each micro-batch one Trident batch with txid = Spark's batch id.

That is what makes the state exactly-once end to end: when Spark runs a batch again after a
crash (same id, same rows for a deterministic query), a transactional or opaque state recognises
the txid and skips or recomputes it. A batch whose commit the state already holds is not run
again at all: the call returns at once.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from squall.api.config import Config, effective_conf
from squall.engine.cluster import LocalCluster
from squall.trident.spouts import TransactionalSpout

log = logging.getLogger("squall.spark")


@dataclass
class _Offer:
    """The batch a sink call waits on, shared by the sink and the spout (in the driver)."""

    txid: int
    rows: list[list]
    done: threading.Event = field(default_factory=threading.Event)
    skipped: bool = False  # the state had committed it already
    failures: int = 0
    last_error: str = ""
    error: str | None = None  # the batch cannot run: said by the sink


_OFFERS: dict[str, _Offer | None] = {}  # spout key -> the batch offered now (spouts pickle: state lives here)


class SparkBatchSpout(TransactionalSpout):
    """The Trident spout of a `TridentSink`: each micro-batch's rows as the batch with txid = batch id.

    Trident checks every operation's fields when the stream is built, before the first batch, so
    the stream's fields are named here: `SparkBatchSpout(["sentence", "ts"])` emits those columns
    of the DataFrame, in that order; `SparkBatchSpout()` emits one field, `"row"`, a dict of every
    column of the row.
    """

    first_txid = 0  # Spark's first batch id
    ROW = "row"

    def __init__(self, fields: list[str] | None = None):
        self.columns = None if fields is None else [fields] if isinstance(fields, str) else list(fields)
        self.fields = [self.ROW] if self.columns is None else self.columns
        self.key = uuid.uuid4().hex
        _OFFERS.setdefault(self.key, None)

    def __deepcopy__(self, memo: dict) -> SparkBatchSpout:
        return self  # every copy the engine makes is this one: the sink's offers reach it

    def get_output_fields(self) -> list[str]:
        return self.fields

    @property
    def offer(self) -> _Offer | None:
        return _OFFERS.get(self.key)

    def offer_batch(self, txid: int, rows: list[list]) -> _Offer:
        o = _OFFERS[self.key] = _Offer(txid, rows)
        return o

    def next_txid(self, committed: int) -> int | None:
        """The txid of the batch to run next (the coordinator asks): the offered one, unless the state
        has committed it already (Spark runs a batch again when it died before recording its end)."""
        o = self.offer
        if o is None or o.done.is_set():
            return None
        if o.txid <= committed:
            o.skipped = True
            o.done.set()
            return None
        return o.txid

    def new_batch(self, txid: int, prev_meta: Any) -> Any:
        o = self.offer
        if o is None or o.txid != txid or o.done.is_set():
            return None
        return {"batch_id": txid, "rows": len(o.rows)}

    def batch_rows(self, txid: int, meta: Any) -> list[list]:
        o = self.offer
        if o is None or o.txid != txid:
            text = (f"Trident must run batch {txid} again (it began and did not commit), but the query offers batch "
                    f"{o.txid if o is not None else 'none'}: was the query restarted from another checkpoint? Give "
                    "the state a new table, or restart from the checkpoint that ran that batch")
            if o is not None:
                o.error = text
                o.done.set()
            raise RuntimeError(text)
        if len(o.rows) != meta.get("rows", len(o.rows)):
            log.warning("squall: batch %d has %d rows now and had %d when it first ran: the query is not "
                        "deterministic, so its replay is not the same batch", txid, len(o.rows), meta["rows"])
        return o.rows

    def batch_failed(self, txid: int, reason: Any) -> None:
        o = self.offer
        if o is not None and o.txid == txid:
            o.failures += 1
            o.last_error = str(getattr(reason, "error", None) or reason)

    commit_failed = batch_failed  # a commit that keeps failing stops the sink just the same

    def success(self, txid: int) -> None:
        o = self.offer
        if o is not None and o.txid == txid:
            o.done.set()


class TridentSink:
    """`df.writeStream.foreachBatch(TridentSink(t))`: each micro-batch is one Trident batch of `t`'s
    stream from `SparkBatchSpout`, txid = batch id; the call returns once the batch is committed.

    A batch that fails `squall.max.replays` + 1 times stops the topology and raises (Trident replays
    a batch whole: a row that always fails would stop every later batch too).
    """

    def __init__(self, trident_topology: Any, conf: dict | None = None, name: str | None = None):
        spouts = [s for _, s, _ in getattr(trident_topology, "_spouts", []) if isinstance(s, SparkBatchSpout)]
        if len(spouts) != 1:
            raise ValueError(f"TridentSink needs a TridentTopology with one stream from a SparkBatchSpout "
                             f"(t.new_stream('rows', SparkBatchSpout([...]))), found {len(spouts)}")
        self.topology = trident_topology
        self.spout = spouts[0]
        self.conf = dict(conf or {})
        self.name = name or "trident-sink"
        self.cluster: LocalCluster | None = None
        self.last_batch: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        with self._lock:
            t0 = time.perf_counter()
            conf = self._conf(batch_df) if self.cluster is None else None  # before a job needs a free core
            rows = self._rows(batch_df, batch_id)
            offer = self.spout.offer_batch(int(batch_id), rows)
            if conf is not None:
                self._start(batch_df, conf)
            self._wait(offer)
            self.last_batch = {"batch_id": int(batch_id), "rows": len(rows), "committed": not offer.skipped,
                               "skipped": offer.skipped, "replayed": offer.failures, "secs": time.perf_counter() - t0}

    def _rows(self, batch_df: Any, batch_id: int) -> list[list]:
        columns = self.spout.columns
        if columns is None:  # one field: the row as a dict
            return [[r] for r in batch_df.toArrow().to_pylist()]
        missing = [f for f in columns if f not in batch_df.columns]
        if missing:
            raise ValueError(f"{self.name}: batch {batch_id} has no column(s) {missing}; its columns are "
                             f"{list(batch_df.columns)} and the SparkBatchSpout reads {columns}")
        table = batch_df.select(*columns).toArrow()
        return [list(r) for r in zip(*(c.to_pylist() for c in table.columns), strict=True)] if table.num_rows else []

    def _conf(self, batch_df: Any) -> dict:
        from squall.engine.spark.slots import slots_leaving_a_core  # noqa: PLC0415 - pyspark is heavy

        return slots_leaving_a_core(batch_df.sparkSession.sparkContext, effective_conf(self.conf), type(self).__name__)

    def _start(self, batch_df: Any, conf: dict) -> None:
        spark = batch_df.sparkSession
        cluster = LocalCluster(engine="spark", spark=spark)
        try:
            cluster.submit_topology(self.name, conf, self.topology.build())
        except BaseException:
            cluster.shutdown()
            raise
        self.cluster = cluster
        self._max_replays = int(conf[Config.SQUALL_MAX_REPLAYS])

    def _wait(self, offer: _Offer) -> None:
        while not offer.done.wait(0.01):
            crash = self.cluster.get_crash(self.name)
            if crash is not None:
                raise RuntimeError(f"{self.name}: the topology stopped during batch {offer.txid}: {crash}") from crash
            if offer.failures > self._max_replays:
                self.close()
                raise RuntimeError(f"{self.name}: batch {offer.txid} failed {offer.failures} times, the last with: "
                                   f"{offer.last_error}. Trident replays a batch whole, so a row that always fails "
                                   "stops every later batch: filter it out in the query or catch it in the function")
        if offer.error is not None:
            self.close()
            raise RuntimeError(f"{self.name}: {offer.error}")

    def close(self) -> None:
        """Kill the topology; a later call submits it again (it resumes from its state's txid)."""
        if self.cluster is not None:
            self.cluster.shutdown()
            self.cluster = None

    def __enter__(self) -> TridentSink:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TridentSink({self.name!r})"
