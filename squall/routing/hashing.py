"""Fields grouping on columns: the same 32-bit hash as the tuple path
(squall.routing.tuples.stable_hash / fields_hash), computed once per distinct value.

A column is dictionary-encoded (Arrow, in C), each distinct value hashed with the tuple path's
own function, and the hashes spread back to the rows by the dictionary indices (numpy), so the
Python work is per distinct key, not per row. Several key fields: the distinct combinations of
their per-column hashes are combined the same way.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from squall.routing.tuples import stable_hash

_I64 = np.int64


def column_hashes(col: pa.Array) -> np.ndarray:
    """stable_hash of every value of the column, as int64."""
    try:
        enc = col if pa.types.is_dictionary(col.type) else col.dictionary_encode(null_encoding="encode")
        uniq, idx = enc.dictionary.to_pylist(), enc.indices
        if idx.null_count:  # a dictionary column's nulls
            hs = np.fromiter(map(stable_hash, uniq), _I64, len(uniq))
            out = np.full(len(col), stable_hash(None), _I64)
            valid = ~np.asarray(idx.is_null().to_numpy(zero_copy_only=False))
            out[valid] = hs[idx.drop_null().to_numpy()]
            return out
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # nested types (lists): distinct values in Python
        vals = col.to_pylist()
        keys = {}
        idx_list = [keys.setdefault(_hashable(v), len(keys)) for v in vals]
        uniq = [None] * len(keys)
        for v in vals:
            uniq[keys[_hashable(v)]] = v
        hs = np.fromiter(map(stable_hash, uniq), _I64, len(uniq))
        return hs[np.asarray(idx_list, _I64)] if vals else np.zeros(0, _I64)
    hs = np.fromiter(map(stable_hash, uniq), _I64, len(uniq))
    return hs[idx.to_numpy(zero_copy_only=False).astype(_I64)] if len(col) else np.zeros(0, _I64)


def _hashable(v: object) -> object:
    if isinstance(v, list):
        return ("\0list", tuple(_hashable(x) for x in v))
    if isinstance(v, dict):
        return ("\0dict", tuple((k, _hashable(x)) for k, x in v.items()))
    return (type(v), v)


def fields_hashes(data: pa.RecordBatch, idx: Sequence[int]) -> np.ndarray:
    """The tuple path's fields_hash of every row, for the key fields at positions `idx`."""
    if len(idx) == 1:
        return column_hashes(data.column(idx[0]))
    per = np.stack([column_hashes(data.column(i)) for i in idx], axis=1)
    if not len(per):
        return np.zeros(0, _I64)
    combos, inverse = np.unique(per, axis=0, return_inverse=True)
    out = np.empty(len(combos), _I64)
    for k, combo in enumerate(combos.tolist()):
        h = 0
        for x in combo:
            h = zlib.crc32(int(x).to_bytes(4, "little"), h)
        out[k] = h
    return out[inverse.reshape(-1)]
