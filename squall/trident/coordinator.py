"""The batch coordinator: a spout on the driver that runs Trident's transactions.

Each batch gets a txid. For transactional and opaque spouts, what batch n is (its metadata,
e.g. file offsets) is persisted before the batch runs, in the same store as the state (or in
memory when no state persists). A batch is emitted as one tuple tree (every tuple of it under
one root): it is "processed" when that tree completes and failed, then replayed with the same
txid, if any part fails. Processed batches are committed strictly in txid order: a commit
tuple goes to every state task, each applies its pending updates for that txid between
`begin_commit(txid)` and `commit(txid)`; when every state task has committed, the batch is
done and `committed` is persisted. A driver that crashes restarts from there.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from squall.api.components import Spout
from squall.trident.spouts import NON_TRANSACTIONAL, OPAQUE, OpaqueTransactionalSpout, TridentSpout

log = logging.getLogger("squall.trident")

BATCH_FIELD = "$batch"
COMMIT_STREAM = "$commit"


class DictMetaStore:
    """Metadata kept in memory: for topologies whose states are all in memory too."""

    def __init__(self) -> None:
        self._d: dict[str, bytes] = {}

    def get(self, key: str) -> bytes | None:
        return self._d.get(key)

    def put(self, key: str, value: bytes) -> None:
        self._d[key] = value


@dataclass
class _Batch:
    txid: int
    attempt: int = 0
    status: str = "new"  # new -> emitted -> processed -> committing
    commit_try: int = 0
    pinned: bool = False  # an opaque batch whose commit may have reached some state: replay it as it was


class TridentSpoutExecutor(Spout):
    """Wraps a Trident spout: emits batches (with txids) and commit tuples, tracks both. It is
    Trident's batch coordinator, so it runs in the driver (its batch metadata and commit order live
    there, and a DRPC spout's requests come from the driver's LocalDRPC)."""

    DRIVER_BOUND = True

    def __init__(self, name: str, spout: TridentSpout, meta_factory: Any = None, max_in_flight: int = 1):
        self.name = name
        self.spout = spout
        self.meta_factory = meta_factory
        self.max_in_flight = max(1, int(max_in_flight))
        self.fields = list(spout.get_output_fields())

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare([BATCH_FIELD, *self.fields])
        declarer.declare([BATCH_FIELD], stream=COMMIT_STREAM)

    # -- lifecycle ----------------------------------------------------------------------

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        pending = conf.get("topology.max.spout.pending")
        if self.spout.kind != OPAQUE and pending:
            self.max_in_flight = max(1, int(pending))
        if self.spout.kind == OPAQUE:
            self.max_in_flight = 1  # the next batch starts where this one's (possibly new) meta ends
        self.meta = self.meta_factory.meta_store(conf) if self.meta_factory is not None else DictMetaStore()
        committed = self._get("committed")
        # txids start at 1, or where a spout that numbers its own batches starts (Spark's batch ids: 0)
        self.committed = int(committed) if committed is not None else getattr(self.spout, "first_txid", 1) - 1
        self.batches: dict[int, _Batch] = {}
        self.replay: deque[int] = deque()
        self.next_txid = self.committed + 1
        # Batches persisted but not committed before a restart run again first, same txids.
        committing = self._get("committing")
        while self._get(f"meta/{self.next_txid}") is not None:
            self.batches[self.next_txid] = _Batch(self.next_txid, pinned=self._pin(self.next_txid, committing))
            self.replay.append(self.next_txid)
            self.next_txid += 1
        if self.replay:
            log.info("trident %s: resuming after txid %d, replaying txids %s", self.name, self.committed,
                     list(self.replay))
        self.spout.open(conf, context)
        self.batches_committed = 0
        self.exhausted = False  # the spout had no new batch the last time it was asked

    def _pin(self, txid: int, committing: Any) -> bool:
        """After a restart, an opaque batch whose commit had started is replayed exactly as it
        was (some state tasks may have committed it): a changed batch would leave their keys
        with tuples that the next batch counts again. Needs the spout's `replay_batch`."""
        if self.spout.kind != OPAQUE or committing != txid:
            return False
        if type(self.spout).replay_batch is OpaqueTransactionalSpout.replay_batch:
            log.warning("trident %s: the commit of txid %d may be partial and %s cannot replay a batch exactly "
                        "(no replay_batch): keys of the first version not in the new one may count twice",
                        self.name, txid, type(self.spout).__name__)
            return False
        return True

    def close(self) -> None:
        self.spout.close()

    # -- metadata ---------------------------------------------------------------------------

    def _key(self, k: str) -> str:
        return f"trident/{self.name}/{k}"

    def _get(self, k: str) -> Any:
        raw = self.meta.get(self._key(k))
        if raw is None or raw == b"":
            return None
        return json.loads(raw)

    def _put(self, k: str, v: Any) -> None:
        self.meta.put(self._key(k), b"" if v is None else json.dumps(v).encode())

    # -- the loop ---------------------------------------------------------------------------

    def next_tuple(self) -> None:
        b = self.batches.get(self.committed + 1)
        if b is not None and b.status == "processed":
            b.status = "committing"
            b.commit_try += 1
            # From here on some state tasks may hold this batch: its contents must not change.
            self._put("committing", b.txid)
            self.collector.emit([(b.txid, b.attempt)], msg_id=("commit", b.txid, b.attempt, b.commit_try),
                                stream=COMMIT_STREAM)
            return
        if self.replay:
            self._emit(self.batches[self.replay.popleft()])
            return
        numbered = getattr(self.spout, "next_txid", None)
        if numbered is not None and not self.batches:  # the spout says which txid its next batch is
            txid = numbered(self.committed)
            if txid is None:
                self.exhausted = True
                return
            self.committed, self.next_txid = txid - 1, txid
        if len(self.batches) < self.max_in_flight:
            b = _Batch(self.next_txid)
            if self._emit(b):
                self.batches[b.txid] = b
                self.next_txid += 1
                self.exhausted = False
            else:
                self.exhausted = True

    @property
    def idle(self) -> bool:
        """Everything the spout had is committed, and it has nothing new."""
        return self.exhausted and not self.batches

    def _emit(self, b: _Batch) -> bool:
        """Emit batch b (first time or replay); False when the spout has no new batch."""
        kind = self.spout.kind
        txid = b.txid
        if kind == NON_TRANSACTIONAL:
            rows = self.spout.next_batch(txid)
            if rows is None:
                return False
        elif kind == OPAQUE:
            if b.pinned:
                meta = self._get(f"meta/{txid}")
                got = (self.spout.replay_batch(txid, self._get(f"meta/{txid - 1}"), meta), meta)
            else:
                got = self.spout.emit_batch(txid, self._get(f"meta/{txid - 1}"))
            if got is None:
                return False
            rows, meta = got
            if not rows and b.status == "new":
                return False
            self._put(f"meta/{txid}", meta)
        else:
            meta = self._get(f"meta/{txid}")
            if meta is None:
                meta = self.spout.new_batch(txid, self._get(f"meta/{txid - 1}"))
                if meta is None:
                    return False
                self._put(f"meta/{txid}", meta)  # persisted before the batch runs
            rows = self.spout.batch_rows(txid, meta)
        b.status = "emitted"
        batch_id = (txid, b.attempt)
        if not rows:
            b.status = "processed"  # an empty batch is processed at once (and committed in order)
            return True
        self.collector.emit_batch([[batch_id, *r] for r in rows], msg_id=("batch", txid, b.attempt))
        return True

    @staticmethod
    def replay_key(msg_id: Any) -> Any:
        """A batch replayed after a lost wave is the same batch (same txid), whatever its attempt."""
        return msg_id[0], msg_id[1]

    def ack(self, msg_id: Any) -> None:
        kind, txid, attempt = msg_id[0], msg_id[1], msg_id[2]
        b = self.batches.get(txid)
        if b is None or b.attempt != attempt:
            return
        if kind == "batch" and b.status == "emitted":
            b.status = "processed"
            on_processed = getattr(self.spout, "batch_processed", None)
            if on_processed is not None:  # e.g. the DRPC spout answers its request (as Storm, before the commit)
                on_processed(txid)
        elif kind == "commit" and b.status == "committing" and msg_id[3] == b.commit_try:
            self.committed = txid
            self._put("committed", txid)
            self._put("committing", None)
            self._put(f"meta/{txid - 1}", None)  # the next batch needs only this one's meta
            del self.batches[txid]
            self.batches_committed += 1
            self.spout.success(txid)

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        kind, txid, attempt = msg_id[0], msg_id[1], msg_id[2]
        b = self.batches.get(txid)
        if b is None or b.attempt != attempt:
            return
        if kind == "commit":
            if b.status == "committing" and msg_id[3] == b.commit_try:
                log.warning("trident %s: commit of txid %d failed (%s); retrying", self.name, txid, reason)
                b.status = "processed"
                on_commit_failed = getattr(self.spout, "commit_failed", None)
                if on_commit_failed is not None:  # e.g. a Spark sink counts the attempts of its batch
                    on_commit_failed(txid, reason)
            return
        b.attempt += 1
        on_failed = getattr(self.spout, "batch_failed", None)
        if self.spout.kind == NON_TRANSACTIONAL:
            log.warning("trident %s: batch %d failed (%s); a non-transactional spout does not replay it",
                        self.name, txid, reason)
            if on_failed is not None:  # e.g. the DRPC spout answers the request with the error
                on_failed(txid, reason)
            b.status = "processed"  # commit it empty, to keep txids in order
            return
        if on_failed is not None:  # e.g. a Spark sink counts the attempts of its batch
            on_failed(txid, reason)
        log.warning("trident %s: batch %d failed (%s); replaying it as attempt %d", self.name, txid, reason,
                    b.attempt)
        b.status = "new"
        self.replay.append(txid)
        self.replay = deque(sorted(self.replay))
