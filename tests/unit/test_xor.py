"""xor_at (the run-folding XOR) against np.bitwise_xor.at, and edge ids against their formula."""

from __future__ import annotations

import pickle
import zlib

import numpy as np
import pytest

from squall.reliability.ids import edge_id_int, edge_ids, edge_ids_for_child, mix64
from squall.reliability.xor import xor_at

_U64 = np.uint64


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _cases() -> list[tuple[str, np.ndarray]]:
    rng = _rng("xor-cases")
    runs = np.repeat(np.arange(5_000), rng.integers(1, 20, 5_000))
    return [
        ("empty", np.zeros(0, np.int64)),
        ("small, repeats", np.array([3, 3, 1, 3, 0, 1], np.int64)),
        ("runs of a sentence's words", runs),
        ("runs, shuffled", rng.permutation(runs)),
        ("each index once, in order", np.arange(10_000)),
        ("each index once, shuffled", rng.permutation(10_000)),
        ("runs, then the same indices again", np.concatenate([runs, runs[::7]])),
        ("all one index", np.zeros(1_000, np.int64)),
        ("negative indices alias positive ones", np.concatenate([np.arange(-50, 0), np.arange(100)])),
    ]


@pytest.mark.parametrize("name,idx", _cases(), ids=[c[0] for c in _cases()])
def test_xor_at_is_bitwise_xor_at(name: str, idx: np.ndarray) -> None:
    rng = _rng(name)
    size = max(int(idx.max()) + 1, -int(idx.min())) if len(idx) else 4
    start = rng.integers(0, 1 << 63, size, dtype=_U64)
    vals = rng.integers(1, 1 << 63, len(idx), dtype=_U64)
    want, got = start.copy(), start.copy()
    np.bitwise_xor.at(want, idx, vals)
    xor_at(got, idx, vals)
    assert np.array_equal(got, want)


def test_xor_at_writes_into_an_unpickled_target() -> None:
    """Arrays that crossed a pickle (a Spark task's inputs) are viewed with numpy's own dtype
    for speed: the XORs must still land in the caller's array."""
    rng = _rng("unpickled")
    idx = np.repeat(np.arange(500), 4)
    vals = pickle.loads(pickle.dumps(rng.integers(1, 1 << 63, len(idx), dtype=_U64)))
    target = pickle.loads(pickle.dumps(np.zeros(500, _U64)))
    want = np.zeros(500, _U64)
    np.bitwise_xor.at(want, idx, vals)
    xor_at(target, idx, vals)
    assert np.array_equal(target, want)
    shuffled = rng.permutation(len(idx))
    xor_at(target, idx[shuffled], vals[shuffled])  # the .at path: the same XORs again cancel out
    assert not target.any()


def _edge_ids_formula(anchor_key: np.ndarray, exec_key: np.ndarray, ordinal: np.ndarray,
                      target: np.ndarray) -> np.ndarray:
    """The edge id formula written plainly (casts, then two mixes; 0 becomes 1)."""
    with np.errstate(over="ignore"):
        inner = exec_key.astype(_U64) + ordinal.astype(_U64) * _U64(0x9E3779B97F4A7C15) \
            + target.astype(_U64) * _U64(0xD6E8FEB86659FD93)
    e = mix64(anchor_key.astype(_U64) ^ mix64(inner))
    e[e == 0] = 1
    return e


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32])
def test_edge_ids_follow_the_formula_for_every_integer_dtype(dtype: type) -> None:
    rng = _rng(f"edges-{np.dtype(dtype).name}")
    n = 1_000
    lo = np.iinfo(dtype).min
    hi = np.iinfo(dtype).max
    anchor = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)  # negative ones too, where the dtype has them
    exec_key = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)
    ordinal = rng.integers(0, 12, n).astype(dtype)
    target = rng.integers(0, 8, n).astype(dtype)
    before = (anchor.copy(), exec_key.copy(), ordinal.copy(), target.copy())
    got = edge_ids(anchor, exec_key, ordinal, target)
    assert np.array_equal(got, _edge_ids_formula(anchor, exec_key, ordinal, target))
    for a, b in zip((anchor, exec_key, ordinal, target), before):
        assert np.array_equal(a, b)  # the inputs are left as they were (views are read, not written)
    # the one-child and one-int forms give the same ids
    one = edge_ids_for_child(anchor[:5], int(exec_key[0]) & ((1 << 64) - 1), int(ordinal[0]), int(target[0]))
    assert np.array_equal(one, edge_ids(anchor[:5], np.full(5, exec_key[0]), np.full(5, ordinal[0]),
                                        np.full(5, target[0])))
    assert edge_id_int(int(anchor[0]) & ((1 << 64) - 1), int(exec_key[0]) & ((1 << 64) - 1), int(ordinal[0]),
                       int(target[0])) == int(got[0])
