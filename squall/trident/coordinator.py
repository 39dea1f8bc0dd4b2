"""The batch coordinator: a spout on the driver that runs Trident's transactions.

Each batch gets a txid. For transactional and opaque spouts, what batch n is (its metadata,
e.g. file offsets) is persisted before the batch runs, in the same store as the state (or in
memory when no state persists). A batch is emitted as one tuple tree (every tuple of it under
one root): it is "processed" when that tree completes and failed, then replayed with the same
txid, if any part fails. Processed batches are committed strictly in txid order: a commit
tuple goes to every state task, each applies its pending updates for that txid between
`begin_commit(txid)` and `commit(txid)`; when every state task has committed, the batch is
done and `committed` is persisted. A driver that crashes restarts from there.

As in Storm, every spout of a topology takes part in the same batches: one coordinator gives
them one txid, and each spout decides that batch's content for its own source (its metadata is
kept per spout and txid), so streams of different spouts merge and join within a batch, and a
state fed by several spouts commits each txid once.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any

from squall.api.components import Spout
from squall.reliability.roots import SharedRoot
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


EMPTY = "$empty"  # a spout's meta for a txid it had nothing for: {EMPTY: its previous meta}


@dataclass
class Source:
    """One Trident spout of a coordinator: its stream id (where its metadata is kept), the spout,
    and the stream its rows go out on."""

    name: str
    spout: TridentSpout
    stream: str = "default"


@dataclass
class _Batch:
    txid: int
    attempt: int = 0
    status: str = "new"  # new -> emitted -> processed -> committing
    commit_try: int = 0
    pinned: bool = False  # an opaque batch whose commit may have reached some state: replay it as it was


class TridentSpoutExecutor(Spout):
    """Runs Trident's batches for one spout, or for several that share every txid: emits each
    batch (every spout's rows on its own stream, one tuple tree) and the commit tuples, and tracks
    both. It is Trident's batch coordinator, so it runs in the driver (its batch metadata and commit
    order live there, and a DRPC spout's requests come from the driver's LocalDRPC)."""

    DRIVER_BOUND = True

    def __init__(self, name: str, spout: TridentSpout | list[Source], meta_factory: Any = None,
                 max_in_flight: int = 1):
        self.name = name
        self.sources = list(spout) if isinstance(spout, list) else [Source(name, spout)]
        self.spout = self.sources[0].spout  # the spout, when there is one (DRPC, Spark batches)
        if len(self.sources) > 1 and any(hasattr(s.spout, "next_txid") for s in self.sources):
            raise ValueError(f"trident {name}: a spout that numbers its own batches (SparkBatchSpout) cannot share "
                             "them with other spouts; give it a topology of its own")
        self.meta_factory = meta_factory
        self.max_in_flight = max(1, int(max_in_flight))
        self.fields = list(self.spout.get_output_fields())

    def declare_output_fields(self, declarer: Any) -> None:
        for s in self.sources:
            declarer.declare([BATCH_FIELD, *s.spout.get_output_fields()], stream=s.stream)
        declarer.declare([BATCH_FIELD], stream=COMMIT_STREAM)

    def _hooks(self, name: str) -> list[Any]:
        return [h for s in self.sources if (h := getattr(s.spout, name, None)) is not None]

    # -- lifecycle ----------------------------------------------------------------------

    def open(self, conf: dict, context: Any, collector: Any) -> None:
        self.collector = collector
        kinds = {s.spout.kind for s in self.sources}
        pending = conf.get("topology.max.spout.pending")
        if OPAQUE in kinds:
            self.max_in_flight = 1  # the next batch starts where this one's (possibly new) meta ends
        elif pending:
            self.max_in_flight = max(1, int(pending))
        self.replays_rows = kinds != {NON_TRANSACTIONAL}
        self.meta = self.meta_factory.meta_store(conf) if self.meta_factory is not None else DictMetaStore()
        committed = self._get("committed")
        # txids start at 1, or where a spout that numbers its own batches starts (Spark's batch ids: 0)
        self.committed = int(committed) if committed is not None else getattr(self.spout, "first_txid", 1) - 1
        self.batches: dict[int, _Batch] = {}
        self.replay: deque[int] = deque()
        self.next_txid = self.committed + 1
        # Batches persisted but not committed before a restart run again first, same txids.
        committing = self._get("committing")
        while any(self._meta(s, self.next_txid) is not None for s in self.sources):
            self.batches[self.next_txid] = _Batch(self.next_txid, pinned=self._pin(self.next_txid, committing))
            self.replay.append(self.next_txid)
            self.next_txid += 1
        if self.replay:
            log.info("trident %s: resuming after txid %d, replaying txids %s", self.name, self.committed,
                     list(self.replay))
        for s in self.sources:
            s.spout.open(conf, context)
        self.batches_committed = 0
        self.exhausted = False  # no spout had a new batch the last time they were asked

    def _pin(self, txid: int, committing: Any) -> bool:
        """After a restart, an opaque batch whose commit had started is replayed exactly as it
        was (some state tasks may have committed it): a changed batch would leave their keys
        with tuples that the next batch counts again. Needs the spouts' `replay_batch`."""
        if committing != txid:
            return False
        opaque = [s.spout for s in self.sources if s.spout.kind == OPAQUE]
        for spout in opaque:
            if type(spout).replay_batch is OpaqueTransactionalSpout.replay_batch:
                log.warning("trident %s: the commit of txid %d may be partial and %s cannot replay a batch exactly "
                            "(no replay_batch): keys of the first version not in the new one may count twice",
                            self.name, txid, type(spout).__name__)
                return False
        return bool(opaque)

    def close(self) -> None:
        for s in self.sources:
            s.spout.close()

    # -- metadata ---------------------------------------------------------------------------

    def _key(self, k: str, name: str | None = None) -> str:
        return f"trident/{name or self.name}/{k}"

    def _get(self, k: str, name: str | None = None) -> Any:
        raw = self.meta.get(self._key(k, name))
        if raw is None or raw == b"":
            return None
        return json.loads(raw)

    def _put(self, k: str, v: Any, name: str | None = None) -> None:
        self.meta.put(self._key(k, name), b"" if v is None else json.dumps(v).encode())

    def _meta(self, s: Source, txid: int) -> Any:
        return self._get(f"meta/{txid}", s.name)

    def _prev_meta(self, s: Source, txid: int) -> Any:
        """Where `s`'s batch `txid` starts: its meta of the txid before (carried over those it had
        nothing for)."""
        m = self._meta(s, txid - 1)
        return m[EMPTY] if isinstance(m, dict) and EMPTY in m else m

    # -- the loop ---------------------------------------------------------------------------

    def next_tuple(self) -> None:
        b = self.batches.get(self.committed + 1)
        if b is not None and b.status == "processed":
            # From here on some state tasks may hold this batch: its contents must not change. Recorded
            # first: a store that fails here leaves the batch as it was, to try again.
            self._put("committing", b.txid)
            b.status = "committing"
            b.commit_try += 1
            self.collector.emit([(b.txid, b.attempt)], msg_id=("commit", b.txid, b.attempt, b.commit_try),
                                stream=COMMIT_STREAM)
            return
        if self.replay:
            self._emit(self.batches[self.replay[0]], fresh=False)  # a store that fails here: tried again
            self.replay.popleft()
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
            if self._emit(b, fresh=True):
                self.batches[b.txid] = b
                self.next_txid += 1
                self.exhausted = False
            else:
                self.exhausted = True

    @property
    def idle(self) -> bool:
        """Everything the spout had is committed, and it has nothing new."""
        return self.exhausted and not self.batches

    def _emit(self, b: _Batch, fresh: bool) -> bool:
        """Emit batch b, every spout's rows of it; False when it is `fresh` (a new txid) and no
        spout has a new batch."""
        txid = b.txid
        parts = [(s, self._rows(s, b, fresh)) for s in self.sources]
        if fresh:
            if all(rows is None for _, rows in parts):
                return False
            for s, rows in parts:  # a spout with nothing new: the same nothing if this txid runs again
                if rows is None and s.spout.kind != NON_TRANSACTIONAL:
                    self._put(f"meta/{txid}", {EMPTY: self._prev_meta(s, txid)}, s.name)
        b.status = "emitted"
        batch_id = (txid, b.attempt)
        root = SharedRoot(("batch", txid, b.attempt))  # every spout's rows: one tree
        emitted = False
        for s, rows in parts:
            if rows:
                self.collector.emit_batch([[batch_id, *r] for r in rows], root, s.stream)
                emitted = True
        if not emitted:
            b.status = "processed"  # an empty batch is processed at once (and committed in order)
        return True

    def _rows(self, s: Source, b: _Batch, fresh: bool) -> list[list] | None:
        """`s`'s rows of batch b; None when b is fresh and `s` has no new batch."""
        spout, txid = s.spout, b.txid
        if spout.kind == NON_TRANSACTIONAL:
            if not fresh and b.attempt > 0:
                return []  # a failed batch is not replayed by a non-transactional spout
            return spout.next_batch(txid)
        meta = self._meta(s, txid)
        if isinstance(meta, dict) and EMPTY in meta:
            return []
        if spout.kind == OPAQUE:
            if b.pinned and meta is not None:
                return spout.replay_batch(txid, self._prev_meta(s, txid), meta)
            got = spout.emit_batch(txid, self._prev_meta(s, txid))
            if got is None or (fresh and not got[0]):
                return None if fresh else []
            rows, meta = got
            self._put(f"meta/{txid}", meta, s.name)
            return rows
        if meta is None:
            meta = spout.new_batch(txid, self._prev_meta(s, txid))
            if meta is None:
                return None if fresh else []
            self._put(f"meta/{txid}", meta, s.name)  # persisted before the batch runs
        return spout.batch_rows(txid, meta)

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
            for on_processed in self._hooks("batch_processed"):  # the DRPC spout answers (as Storm, before the commit)
                on_processed(txid)
        elif kind == "commit" and b.status == "committing" and msg_id[3] == b.commit_try:
            try:
                self._put("committed", txid)
                self._put("committing", None)
                for s in self.sources:
                    self._put(f"meta/{txid - 1}", None, s.name)  # the next batch needs only this one's meta
            except Exception as e:  # noqa: BLE001 - not recorded: commit it again (the states skip what they hold)
                log.warning("trident %s: recording the commit of txid %d failed (%s); committing it again",
                            self.name, txid, e)
                b.status = "processed"
                return
            self.committed = txid
            del self.batches[txid]
            self.batches_committed += 1
            for s in self.sources:
                s.spout.success(txid)

    def fail(self, msg_id: Any, reason: Any = None) -> None:
        kind, txid, attempt = msg_id[0], msg_id[1], msg_id[2]
        b = self.batches.get(txid)
        if b is None or b.attempt != attempt:
            return
        if kind == "commit":
            if b.status == "committing" and msg_id[3] == b.commit_try:
                log.warning("trident %s: commit of txid %d failed (%s); retrying", self.name, txid, reason)
                b.status = "processed"
                for on_commit_failed in self._hooks("commit_failed"):  # e.g. a Spark sink counts its attempts
                    on_commit_failed(txid, reason)
            return
        b.attempt += 1
        hooks = self._hooks("batch_failed")  # e.g. the DRPC spout answers the request with the error
        if not self.replays_rows:
            log.warning("trident %s: batch %d failed (%s); a non-transactional spout does not replay it",
                        self.name, txid, reason)
            for on_failed in hooks:
                on_failed(txid, reason)
            b.status = "processed"  # commit it empty, to keep txids in order
            return
        for on_failed in hooks:  # e.g. a Spark sink counts the attempts of its batch
            on_failed(txid, reason)
        log.warning("trident %s: batch %d failed (%s); replaying it as attempt %d", self.name, txid, reason,
                    b.attempt)
        b.status = "new"
        self.replay.append(txid)
        self.replay = deque(sorted(self.replay))
