"""A tracked batch travels with its anchor offsets packed to a row count when every row has
exactly one anchor, and its roots run-length coded when rows of one tree sit together; every
batch comes back from pickling with the same anchors."""

from __future__ import annotations

import pickle
import zlib

import numpy as np
import pyarrow as pa
import pytest

from squall.columnar.batch import ColumnBatch
from squall.reliability.batch import TupleBatch, pack_offsets, pack_roots, pack_steps, unpack_roots

U64 = np.uint64


def _anchors(counts: list[int], run: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Offsets for rows with these anchor counts; roots in runs of `run` equal values."""
    off = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=off[1:])
    n = int(off[-1])
    roots = (np.arange(n, dtype=U64) // U64(run)) * U64(0xD1B54A32D192ED03) + U64(100)
    return off, roots, np.arange(7, 7 + n, dtype=U64) * U64(0x9E3779B97F4A7C15)


def _tuple_batch(counts: list[int] | None, run: int = 1) -> TupleBatch:
    values = [[f"w{i}"] for i in range(len(counts) if counts is not None else 5)]
    if counts is None:
        return TupleBatch("split", "default", ("word",), 4, values)
    return TupleBatch("split", "default", ("word",), 4, values, *_anchors(counts, run))


def _column_batch(counts: list[int], run: int = 1) -> ColumnBatch:
    data = pa.RecordBatch.from_pydict({"word": [f"w{i}" for i in range(len(counts))]})
    return ColumnBatch("split", "default", ("word",), 4, data, *_anchors(counts, run))


@pytest.mark.parametrize("counts", [[1, 1, 1, 1], [1, 0, 2, 1], [2, 0, 0, 2], [1], [], [1] * 500, [1, 3] * 200])
@pytest.mark.parametrize("run", [1, 2, 10])
@pytest.mark.parametrize("make", [_tuple_batch, _column_batch])
def test_anchors_come_back_the_same(make, counts, run):
    batch = make(counts, run)
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


def test_roots_in_long_runs_are_run_length_coded():
    runs = np.repeat(np.arange(50, dtype=U64), 10)
    values, lengths = pack_roots(runs)
    np.testing.assert_array_equal(values, np.arange(50, dtype=U64))  # too few run roots to step-code
    assert lengths.tolist() == [10] * 50 and lengths.dtype == np.uint8
    random = np.random.default_rng(zlib.crc32(b"roots")).integers(0, 1 << 62, 200, dtype=U64)
    short = np.repeat(random, 2)  # runs of 2, in no order: left as they are
    assert pack_roots(short) is short


@pytest.mark.parametrize("roots", [
    np.arange(1 << 40, (1 << 40) + 1000, dtype=U64),  # a spout's consecutive roots
    np.arange(1 << 40, (1 << 40) + 2000, 2, dtype=U64),  # every other one (a shuffle to 2 tasks)
    np.repeat(np.arange(7, 7 + 300 * 1000, 1000, dtype=U64), 9),  # runs, run roots 1,000 apart
    np.sort(np.random.default_rng(zlib.crc32(b"gaps")).integers(0, 1 << 20, 500).astype(U64)),  # steps < 65,536
])
def test_roots_in_order_travel_as_small_steps(roots):
    packed = pack_roots(roots)
    assert isinstance(packed, tuple)
    assert len(pickle.dumps(packed)) < 2.5 * len(roots) + 200  # 8 bytes a root unpacked
    back = unpack_roots(pickle.loads(pickle.dumps(packed)))
    assert back.dtype == U64 and back.tolist() == roots.tolist()


@pytest.mark.parametrize("first", [0, 12_345, (1 << 64) - 50])
def test_consecutive_roots_travel_as_first_and_count(first):
    roots = np.arange(100, dtype=U64) + np.uint64(first)  # a spout's roots of a wave; the last case wraps
    packed = pack_steps(roots)
    assert packed == (first, 100)
    back = unpack_roots(pickle.loads(pickle.dumps(packed)))
    assert back.dtype == U64 and back.tolist() == roots.tolist()
    roots[60] += np.uint64(1)  # one step of 2 (and one of 0): steps again
    assert type(pack_steps(roots)[1]) is np.ndarray


def test_roots_with_a_big_step_or_a_step_down_travel_as_they_are():
    up = np.arange(100, dtype=U64)
    up[50:] += np.uint64(1 << 16)
    assert pack_steps(up) is up
    down = np.arange(100, dtype=U64)[::-1].copy()
    assert pack_steps(down) is down
    assert pack_steps(up.astype(np.int64)).dtype == np.int64  # only uint64 ids are coded
    split = _tuple_batch([1] * 1000, run=10)
    unique = _tuple_batch([1] * 1000, run=1)
    assert len(pickle.dumps(split)) < len(pickle.dumps(unique)) - 6000  # 900 roots not sent


@pytest.mark.parametrize("rows", [
    [[f"w{i}"] for i in range(300)],  # a one-field stream: travels as one flat list
    [[i % 7] for i in range(10)],  # too few rows to bother
    [["a"]] * 70 + [["b", "c"]] + [[None]] * 10,  # a row of another length: as it is
])
def test_one_field_rows_come_back_as_rows_of_their_own(rows):
    b = TupleBatch("split", "default", ("word",), 4, [list(r) for r in rows])
    got = pickle.loads(pickle.dumps(b))
    assert got.values == rows
    assert all(type(v) is list for v in got.values)
    assert len({id(v) for v in got.values}) == len(rows)  # each row its own list: a bolt may change it
    packed = b.__getstate__()[4]
    assert (type(packed) is tuple) == (len(rows) >= 64 and all(len(r) == 1 for r in rows))


def test_rows_given_as_a_tuple_come_back_as_a_list_of_rows():
    rows = tuple([f"w{i}", i] for i in range(5))  # a tuple of rows is never taken for packed rows
    got = pickle.loads(pickle.dumps(TupleBatch("split", "default", ("word", "n"), 4, rows)))
    assert got.values == [list(r) for r in rows] and type(got.values) is list


def test_a_packed_one_field_batch_stays_flat_and_its_tuples_read_as_any():
    """One-field rows that travelled packed stay plain values: Tuples read them with no list
    made per row, and every way of reading a Tuple gives what a list-backed one gives."""
    import copy

    from squall.reliability.tuple import tuples_of

    sent = _tuple_batch([1] * 100)
    got = pickle.loads(pickle.dumps(sent))
    assert got.flat == [f"w{i}" for i in range(100)] and got._rows is None and len(got) == 100
    flat_tuples = tuples_of(got)
    listed = tuples_of(copy.copy(sent))  # the same rows as lists
    for t, u in zip(flat_tuples, listed):
        assert t._values is None  # nothing made yet
        assert t[0] == t[-1] == t["word"] == t.get_value_by_field("word") == u[0]
        assert len(t) == 1 and t.select(["word"]) == [u[0]] and list(t) == u.values
        assert dict(t.message_id) == dict(u.message_id) and t.contains("word") and not t.contains("x")
        with pytest.raises(IndexError):
            t[1]
        with pytest.raises(KeyError, match="has no field 'nope'"):
            t["nope"]
        assert t.values == u.values and t.values is t.values  # made once, then kept
    held = pickle.loads(pickle.dumps(flat_tuples[7]))  # a tuple held across waves keeps its one row
    assert held[0] == "w7" and held.values == ["w7"] and dict(held.message_id) == dict(listed[7].message_id)
    assert got.row_values(3) == ["w3"] and got.row_batch(3).values == [["w3"]]
    again = pickle.loads(pickle.dumps(got))  # sent on as it came: flat again
    assert again.flat == got.flat and again.values == sent.values and got.values == sent.values
