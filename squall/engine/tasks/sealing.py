"""Every batch that crosses a task boundary is checked (and, for Spark, serialized once) here,
so a value that cannot cross fails only the tuple that carries it, on every engine alike.

A bolt may emit anything Python holds; Spark must pickle it to move it to another task. A
value that does not pickle (a generator, a lock, an open file) would kill the whole wave's
job. So the batch is pickled once; only if that fails is it checked row by row: the culprit
rows are dropped, their trees fail (reason "error") and an error record names the component,
task, stream, field and type. The local engine gives the same verdict: a batch whose values
are all of plain types is known to pickle, any other is checked the same way.
"""

from __future__ import annotations

import io
import pickle
from itertools import chain
from typing import Any

import numpy as np

from squall.engine.tasks.task_result import TaskResult
from squall.observe.errors import ErrorRecord
from squall.reliability.batch import TupleBatch, take_rows
from squall.reliability.pending import FailReason

PLAIN_TYPES = frozenset({str, int, float, bool, bytes, type(None)})  # always pickle


def dumps(obj: Any) -> bytes:
    """A batch as bytes, pickled without the memo: a batch is many small rows, mostly of
    objects met once, and the memo's bookkeeping would be most of the time. An object that two
    rows share is written twice, as Storm serializes each tuple on its own. A cycle cannot be
    written that way; then the batch is pickled with the memo."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        pickler.fast = True  # documented as deprecated: a Python without it pickles with the memo
        pickler.dump(obj)
    except (AttributeError, ValueError, RecursionError):  # no fast mode, or a cycle: the memo handles it
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return buf.getvalue()


def seal_outputs(res: TaskResult, to_bytes: bool) -> list[tuple[int, Any]]:
    """(target task, batch) for every output of `res` that can cross a task boundary; the
    batch as bytes when `to_bytes` (Spark), else as is. Culprit rows fail into `res`."""
    out = []
    for target, batch in res.outputs:
        if getattr(batch, "always_crosses", False):  # Arrow columns (squall.columnar): they always serialize
            out.append((target, dumps(batch) if to_bytes else batch))
            continue
        if to_bytes:
            try:
                out.append((target, dumps(batch)))
                continue
            except Exception:  # noqa: BLE001 - find the rows that cannot cross; they fail alone
                pass
        elif crosses(batch.values if getattr(batch, "flat", None) is None else (batch.flat,)):
            out.append((target, batch))
            continue
        batch = drop_unserializable(batch, res)
        if batch is not None:
            out.append((target, dumps(batch) if to_bytes else batch))
    return out


def crosses(values: list[list]) -> bool:
    """Whether these rows' values can all cross a task boundary: plain types surely do (a scan
    of types, no pickling); anything else is pickled to find out."""
    if set(map(type, chain.from_iterable(values))) <= PLAIN_TYPES:
        return True
    try:
        dumps(values)
        return True
    except Exception:  # noqa: BLE001
        return False


def crosses_all(values: list[list], buckets: list[tuple[Any, int]]) -> bool:
    """`crosses` for the lean path's buckets of values (a one-field stream's flat: one "row")."""
    rows: list = []
    for b, v in enumerate(values):
        if v:
            if buckets[b][0].nfields == 1:
                rows.append(v)
            else:
                rows.extend(v)
    return crosses(rows)


def unserializable_rows(values: list[list]) -> list[tuple[int, int, BaseException]]:
    """(row, field index, error) for every row with a value that does not pickle."""
    bad = []
    for i, row in enumerate(values):
        try:
            dumps(row)
        except Exception:  # noqa: BLE001
            for j, v in enumerate(row):
                try:
                    dumps(v)
                except Exception as e:  # noqa: BLE001
                    bad.append((i, j, e))
                    break
            else:
                bad.append((i, -1, TypeError("the tuple's values do not pickle together")))
    return bad


def describe(component: str, task: int, stream: str, fields: tuple[str, ...], values: list, field: int,
             err: BaseException) -> ErrorRecord:
    """The error record of a tuple that cannot cross a task boundary."""
    name = fields[field] if 0 <= field < len(fields) else "?"
    kind = type(values[field]).__qualname__ if field >= 0 else "?"
    others = [v for k, v in enumerate(values) if k != field]
    text = (f"UnserializableValue: {component!r} (task {task}) emitted on stream {stream!r} a value for field "
            f"{name!r} of type {kind} that cannot be sent to another task ({type(err).__name__}: {err}); "
            "that tuple fails, the others go on. Emit plain data (str, numbers, bytes, lists, dicts, "
            "dataclasses) instead")
    return ErrorRecord.from_exception(component, task, text, others, kind="error")


def drop_unserializable(batch: TupleBatch, res: TaskResult) -> TupleBatch | None:
    """`batch` without its unserializable rows, whose trees fail (into `res`) with an error."""
    bad = unserializable_rows(batch.values)
    if not bad:
        raise TypeError(f"{batch!r} does not pickle, though each of its rows does")
    for row, field, err in bad:
        rec = describe(batch.component, batch.source_task, batch.stream, batch.fields, batch.values[row], field, err)
        res.errors.append(rec)
        roots, _ = batch.anchors_of(row)
        why = FailReason("error", batch.component, batch.source_task, rec.error)
        for r in roots.tolist():
            res.fail_roots.append(r)
            res.fail_reasons.append(why)
    keep = np.setdiff1d(np.arange(len(batch)), [b[0] for b in bad])
    kept = take_rows(batch, keep) if len(keep) else None
    settle = getattr(batch, "anc_settle", None)
    if settle is not None:  # sent with no edges (reliability/settled.py): so many rows less to settle
        res.sent = [s._replace(rows=len(keep)) if s.batch == settle else s for s in res.sent]
        if kept is not None:
            kept.anc_settle = settle
    return kept


def portable_captured(captured: dict[str, list[list]]) -> dict[str, list[list]]:
    """Captured emits (tests) as they can travel to the driver: a row that does not pickle is
    shown by its repr (its tuple failed; the capture still says it was emitted)."""
    portable = {}
    for stream, rows in captured.items():
        bad = set() if crosses(rows) else {i for i, _, _ in unserializable_rows(rows)}
        portable[stream] = [[repr(v) for v in row] if i in bad else row for i, row in enumerate(rows)]
    return portable
