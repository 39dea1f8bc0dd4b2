"""XOR into an array at indices that may repeat: the fold at the heart of acking.

`np.bitwise_xor.at` takes the indices one by one, which is slow. A tuple tree's messages
mostly sit together (a sentence's words are emitted, acked and sent one after another), so runs
of one index are folded first with `reduceat`, and when what is left has every index once, a
plain fancy-indexed XOR does the rest.

An array that was unpickled (every array a Spark task or the driver receives) has a dtype
instance of its own, not numpy's, and `ufunc.at` then takes a much slower path. The arrays
`.at` gets are viewed with numpy's own dtype first (a view: no copy).
"""

from __future__ import annotations

import numpy as np

from squall.reliability.batch import run_starts

FOLD_MIN = 64  # below this many, np.bitwise_xor.at alone is as fast


def fold_runs(idx: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Neighbours with one index XORed into one entry, when runs are two or more long on average
    (a sentence's words); otherwise `idx` and `vals` as they are (a pass for little gain)."""
    runs = run_starts(idx)
    if 2 * len(runs) <= len(idx):
        return idx[runs], np.bitwise_xor.reduceat(vals, runs)
    return idx, vals


def xor_at(target: np.ndarray, idx: np.ndarray, vals: np.ndarray) -> None:
    """target[idx[k]] ^= vals[k] for every k, repeated indices included (np.bitwise_xor.at)."""
    n = len(idx)
    target, vals = target.view(target.dtype.type), vals.view(vals.dtype.type)  # numpy's own dtypes (above)
    if n >= FOLD_MIN:
        idx, vals = fold_runs(idx, vals)
        # each index once (sorted, and none negative: -1 and n-1 are one element): no .at needed
        if idx[0] >= 0 and (idx[1:] > idx[:-1]).all():
            target[idx] ^= vals
            return
    np.bitwise_xor.at(target, idx, vals)
