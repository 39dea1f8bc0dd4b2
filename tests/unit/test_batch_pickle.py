"""A tracked batch travels with its anchor offsets packed to a row count when every row has
exactly one anchor; every batch comes back from pickling with the same anchors."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest

from squall.columnar.batch import ColumnBatch
from squall.reliability.batch import TupleBatch, pack_offsets

U64 = np.uint64


def _anchors(counts: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    off = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=off[1:])
    n = int(off[-1])
    return off, np.arange(100, 100 + n, dtype=U64), np.arange(7, 7 + n, dtype=U64) * U64(0x9E3779B97F4A7C15)


def _tuple_batch(counts: list[int] | None) -> TupleBatch:
    values = [[f"w{i}"] for i in range(len(counts) if counts is not None else 5)]
    if counts is None:
        return TupleBatch("split", "default", ("word",), 4, values)
    return TupleBatch("split", "default", ("word",), 4, values, *_anchors(counts))


def _column_batch(counts: list[int]) -> ColumnBatch:
    data = pa.RecordBatch.from_pydict({"word": [f"w{i}" for i in range(len(counts))]})
    return ColumnBatch("split", "default", ("word",), 4, data, *_anchors(counts))


@pytest.mark.parametrize("counts", [[1, 1, 1, 1], [1, 0, 2, 1], [2, 0, 0, 2], [1], []])
@pytest.mark.parametrize("make", [_tuple_batch, _column_batch])
def test_anchors_come_back_the_same(make, counts):
    batch = make(counts)
    back = pickle.loads(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL))
    assert back.anc_off.dtype == np.int64
    for a in ("anc_off", "anc_root", "anc_val"):
        np.testing.assert_array_equal(getattr(back, a), getattr(batch, a))
    assert len(back) == len(batch) and back.fields == batch.fields


def test_one_anchor_per_row_packs_to_the_row_count():
    assert pack_offsets(np.arange(5, dtype=np.int64)) == 4
    mixed = np.array([0, 1, 1, 3, 4], np.int64)  # four rows, four anchors, not one each
    assert pack_offsets(mixed) is mixed
    one = _tuple_batch([1] * 1000)
    several = _tuple_batch([1] * 999 + [2])
    assert len(pickle.dumps(one)) < len(pickle.dumps(several)) - 7000  # 1,001 offsets not sent


def test_an_untracked_batch_stays_untracked():
    back = pickle.loads(pickle.dumps(_tuple_batch(None)))
    assert back.anc_off is None and back.anc_root is None and back.anc_val is None
