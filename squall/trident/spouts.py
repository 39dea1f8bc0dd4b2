"""Trident spouts. Each kind promises something different about a replayed batch:

- transactional: batch n is always the same tuples (its metadata, e.g. offsets, is persisted
  before it runs, and a replay re-reads exactly that);
- opaque transactional: a replay of batch n may differ, but every tuple is in exactly one
  successfully committed batch;
- non-transactional: no promise; a failed batch is not replayed.
"""

from __future__ import annotations

import glob
import json
import logging
import os
from typing import Any

log = logging.getLogger("squall.trident")

TRANSACTIONAL = "transactional"
OPAQUE = "opaque"
NON_TRANSACTIONAL = "non-transactional"


class TridentSpout:
    kind = TRANSACTIONAL

    def get_output_fields(self) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} must define get_output_fields()")

    def open(self, conf: dict, context: Any) -> None:  # noqa: B027 - optional hook
        pass

    def success(self, txid: int) -> None:  # noqa: B027
        """Batch `txid` is committed (every state updated)."""

    def close(self) -> None:  # noqa: B027
        pass


class TransactionalSpout(TridentSpout):
    """new_batch(txid, prev_meta) -> meta, or None when there is no new data;
    batch_rows(txid, meta) -> the batch's value lists, the same every time for the same meta.
    `meta` must be JSON-serializable (it is persisted before the batch runs)."""

    kind = TRANSACTIONAL

    def new_batch(self, txid: int, prev_meta: Any) -> Any:
        raise NotImplementedError

    def batch_rows(self, txid: int, meta: Any) -> list[list]:
        raise NotImplementedError


class OpaqueTransactionalSpout(TridentSpout):
    """emit_batch(txid, prev_meta) -> (rows, meta): rows may differ when txid is replayed
    (with the same prev_meta); meta says where the next batch starts."""

    kind = OPAQUE

    def emit_batch(self, txid: int, prev_meta: Any) -> tuple[list[list], Any] | None:
        raise NotImplementedError

    def replay_batch(self, txid: int, prev_meta: Any, meta: Any) -> list[list]:
        """Optional: the rows of the batch that emit_batch returned with `meta`. Used only when
        the driver died while committing txid (some state may hold it), so that batch must
        not change; without it, such a replay may count keys of the first version twice."""
        raise NotImplementedError


class NonTransactionalSpout(TridentSpout):
    """next_batch(txid) -> rows or None. A failed batch is dropped, not replayed."""

    kind = NON_TRANSACTIONAL

    def next_batch(self, txid: int) -> list[list] | None:
        raise NotImplementedError


class FixedBatchSpout(TransactionalSpout):
    """Storm's FixedBatchSpout: the given tuples in batches of `batch_size`; `set_cycle(True)`
    starts over at the end."""

    def __init__(self, fields: list[str], batch_size: int, *tuples: list):
        self.fields = list(fields)
        self.batch_size = int(batch_size)
        self.tuples = [list(t) for t in tuples]
        self.cycle = False

    def set_cycle(self, cycle: bool) -> None:
        self.cycle = bool(cycle)

    def get_output_fields(self) -> list[str]:
        return self.fields

    def new_batch(self, txid: int, prev_meta: Any) -> Any:
        start = 0 if prev_meta is None else prev_meta[1]
        if start >= len(self.tuples):
            if not self.cycle or not self.tuples:
                return None
            start = 0
        return [start, min(start + self.batch_size, len(self.tuples))]

    def batch_rows(self, txid: int, meta: Any) -> list[list]:
        return self.tuples[meta[0]:meta[1]]


class JsonLinesFileSpout(TransactionalSpout):
    """A directory of JSON-lines files, read in name order; a batch is up to `batch_size`
    complete lines, its meta the byte ranges [[file, start, end], ...] it covers, so a replay
    re-reads exactly the same lines. Only complete lines (ending in a newline) are read: a
    file being appended to is safe. Each line is an object; `fields` are taken from it (missing
    ones are None). A line that is not valid JSON is skipped and logged with file:offset."""

    def __init__(self, directory: str, fields: list[str], batch_size: int = 1000, pattern: str = "*.jsonl"):
        self.directory = directory
        self.fields = list(fields)
        self.batch_size = int(batch_size)
        self.pattern = pattern
        self.bad_lines = 0

    def get_output_fields(self) -> list[str]:
        return self.fields

    def _files(self) -> list[str]:
        return sorted(os.path.basename(p) for p in glob.glob(os.path.join(self.directory, self.pattern)))

    def new_batch(self, txid: int, prev_meta: Any) -> Any:
        cur_file, cur_off = (prev_meta[-1][0], prev_meta[-1][2]) if prev_meta else (None, 0)
        ranges = []
        need = self.batch_size
        for name in self._files():
            if cur_file is not None and name < cur_file:
                continue
            start = cur_off if name == cur_file else 0
            end, n = self._scan(name, start, need)
            if n:
                ranges.append([name, start, end])
                need -= n
            if need <= 0:
                break
        return ranges or None

    def _scan(self, name: str, start: int, need: int) -> tuple[int, int]:
        """Offset after up to `need` complete lines from `start`, and how many lines."""
        n = 0
        pos = start
        with open(os.path.join(self.directory, name), "rb") as f:
            f.seek(start)
            while n < need:
                line = f.readline()
                if not line.endswith(b"\n"):
                    break
                pos += len(line)
                if line.strip():
                    n += 1
        return pos, n

    def batch_rows(self, txid: int, meta: Any) -> list[list]:
        rows = []
        for name, start, end in meta:
            with open(os.path.join(self.directory, name), "rb") as f:
                f.seek(start)
                data = f.read(end - start)
            offset = start
            for line in data.splitlines(keepends=True):
                text = line.strip()
                if text:
                    try:
                        obj = json.loads(text)
                        if not isinstance(obj, dict):
                            raise ValueError("not a JSON object")
                        rows.append([obj.get(f) for f in self.fields])
                    except ValueError as e:
                        self.bad_lines += 1
                        log.warning("skipping bad line %s:%d: %s", name, offset, e)
                offset += len(line)
        return rows
