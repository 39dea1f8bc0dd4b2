"""64-bit ids: root ids from a seeded counter, edge ids as a deterministic mix.

Edge ids are a pure function of (anchor key, executing-input key, ordinal, target task), so a
task that Spark runs again produces exactly the same ids and cannot unbalance a tree. Root ids
carry their spout task in the top bits over a counter from a seeded start: unique without
coordination (each spout task hands out its own, wherever it runs), spread evenly over ackers by
`root mod ackers`, and dense per spout task and acker, which lets the ledger index pending trees
by arithmetic instead of hashing.
"""

from __future__ import annotations

import os

import numpy as np

MASK64 = (1 << 64) - 1
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)
_C3 = np.uint64(0xD6E8FEB86659FD93)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer over a uint64 array: a bijection with good avalanche."""
    return _mix_in_place(x.astype(np.uint64, copy=True))


_CHUNK = 1 << 15  # 256 KB of uint64: a mix's steps (and their temporaries) stay in the core's cache
with np.errstate(over="ignore"):
    _GOLD_STEPS = np.arange(_CHUNK, dtype=np.uint64) * _GOLD  # position i's term of a splitmix64 stream


def _mix_in_place(x: np.ndarray) -> np.ndarray:
    """mix64 of a uint64 array this module made, in place (no copy of it first). Long arrays
    are mixed a chunk at a time: each step is a pass over memory, and a chunk's passes stay in
    the core's cache."""
    for s in range(0, len(x), _CHUNK):
        _mix_chunk(x[s:s + _CHUNK])
    return x


def _mix_chunk(x: np.ndarray) -> None:
    x ^= x >> _S30
    x *= _C1
    x ^= x >> _S27
    x *= _C2
    x ^= x >> _S31


def _u64(a: np.ndarray) -> np.ndarray:
    """An integer array as uint64: 64-bit ones as a view (the same bits a cast gives), no copy."""
    return a.view(np.uint64) if a.dtype == np.int64 or a.dtype == np.uint64 else a.astype(np.uint64)


def mix64_int(x: int) -> int:
    """mix64 for one Python int (same result as the array version)."""
    x &= MASK64
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & MASK64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def nonzero(x: np.ndarray) -> np.ndarray:
    """0 is never an id (it would vanish from an XOR): map it to 1."""
    if not x.all():  # one pass, no mask made (a 0 comes once in 2**64)
        x[x == 0] = 1
    return x


def row_keys(first_root: np.ndarray, first_val: np.ndarray) -> np.ndarray:
    """The identity of a tracked tuple: a mix of its first (root, value) pair."""
    return _mix_in_place(_u64(first_root) ^ mix64(first_val))


def edge_ids(anchor_key: np.ndarray, exec_key: np.ndarray, ordinal: np.ndarray, target: np.ndarray) -> np.ndarray:
    """One edge id per (anchor, executing input, emit ordinal within that execute, target task).
    Each step writes into the one array it made (no temporary array per step)."""
    with np.errstate(over="ignore"):
        inner = _u64(ordinal) * _GOLD
        inner += _u64(exec_key)
        inner += _u64(target) * _C3
    x = _mix_in_place(inner)
    x ^= _u64(anchor_key)
    return nonzero(_mix_in_place(x))


def edge_ids_for_child(anchor_key: np.ndarray, exec_key: int, ordinal: int, target: int) -> np.ndarray:
    """`edge_ids` for many anchors of one child (one executing key, ordinal and target): the
    child's part is mixed once, as a Python int. Same ids as `edge_ids`."""
    inner = mix64_int(exec_key + ordinal * 0x9E3779B97F4A7C15 + target * 0xD6E8FEB86659FD93)
    return nonzero(_mix_in_place(_u64(anchor_key) ^ np.uint64(inner)))  # one new array, mixed in place


def derived_edge_ids(roots: np.ndarray, salt: int) -> np.ndarray:
    """Edge ids a receiving task makes again from what it already has: the rows of one batch
    (one emit to one target task, whose `salt` is `derived_salt`) get a splitmix64 stream from
    the salt, position by position, each XORed with the row's root before the mix (one mix a
    row, where `edge_ids` takes two). Made a chunk at a time, as `_mix_in_place`."""
    n = len(roots)
    out = np.empty(n, np.uint64)
    roots = _u64(roots)
    for a in range(0, n, _CHUNK):
        x = out[a:a + _CHUNK]
        start = np.uint64((salt + a * 0x9E3779B97F4A7C15) & MASK64)  # position a's term
        np.add(_GOLD_STEPS[:len(x)], start, out=x)
        x ^= roots[a:a + _CHUNK]
        _mix_chunk(x)
    return nonzero(out)


def derived_salt(execute_salt: int, emit_seq: int, target: int) -> int:
    """The salt of one emit's children sent to one target task: `execute_salt` names the task and
    wave, `emit_seq` the emit within them (rows emitted before it), so no two emits of a task
    share one."""
    return mix64_int(execute_salt ^ mix64_int(emit_seq * 0x9E3779B97F4A7C15 + target * 0xD6E8FEB86659FD93 + 0xED6E))


def edge_id_int(anchor_key: int, exec_key: int, ordinal: int, target: int) -> int:
    inner = (exec_key + ordinal * 0x9E3779B97F4A7C15 + target * 0xD6E8FEB86659FD93) & MASK64
    e = mix64_int(anchor_key ^ mix64_int(inner))
    return e or 1


ROOT_TASK_SHIFT = 48  # a root's top bits name the spout task that owns it
_SEQ_START_BITS = 46  # the counter starts below 2**46, leaving 2**46 ids of head room per task


def root_owner(roots: np.ndarray) -> np.ndarray:
    """The spout task of each root (its top bits): an acker sends a verdict there with no lookup."""
    return (_u64(roots) >> np.uint64(ROOT_TASK_SHIFT)).astype(np.int64)


class RootIdGenerator:
    """One spout task's root ids: the task's id in the top bits over a counter from a seeded start
    (random when no seed is given). Unique across spout tasks without coordination, wherever each
    runs, and consecutive per task, so an acker's ledger indexes one task's trees by arithmetic."""

    def __init__(self, seed: int | None = None, task: int = 0):
        if seed is None:
            start = int.from_bytes(os.urandom(8), "little")
        else:
            start = mix64_int(int(seed) + 0x5A17 + int(task) * 0x9E3779B97F4A7C15)
        if not 0 <= task < 1 << (63 - ROOT_TASK_SHIFT):
            raise ValueError(f"a spout task id must be below {1 << (63 - ROOT_TASK_SHIFT)}, got {task}")
        self.task = task
        self._next = (int(task) << ROOT_TASK_SHIFT) | ((start & ((1 << _SEQ_START_BITS) - 1)) + 1)

    def take(self, n: int) -> np.ndarray:
        first = self._next
        self._next += n
        return np.arange(first, first + n, dtype=np.uint64)

    def take_one(self) -> int:
        first = self._next
        self._next += 1
        return first
