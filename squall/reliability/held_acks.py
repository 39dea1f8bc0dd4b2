"""HeldAcks: ack messages a bolt task computed but holds back (a stateful bolt, until its
state is committed).

The task's flush computes the ack messages of a batch as usual, in bulk, `(root, val ^ out)`
per root of each acked input, but puts them here instead of in the wave's result; fails still
go out at once. Until released, each held tree stays incomplete in the acker (its XOR is not
0), so its spout tuple is not acked. `release()` sends them all at the next flush; `fail_all`
fails their trees instead. Messages are two uint64 arrays per batch: about 16 bytes per root,
carried with the task between waves. It speaks the HeldStore protocol the flush settles
(`take_messages`, `release`), so the collector's `track_held` hands it to the flush.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_U64 = np.uint64


class _Sink:
    """Where one flush's messages go: acks held, fails to the wave's result."""

    __slots__ = ("ack_roots", "ack_vals", "fail_roots", "fail_reasons")

    def __init__(self, held: HeldAcks, res: Any):
        self.ack_roots, self.ack_vals = held.roots, held.vals
        self.fail_roots, self.fail_reasons = res.fail_roots, res.fail_reasons


class HeldAcks:
    """Ack messages held back; see the module docstring."""

    def __init__(self) -> None:
        self.roots: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self._out: tuple[np.ndarray, np.ndarray] | None = None  # released, sent at the next flush
        self._fails: list[tuple[np.ndarray, Any]] = []

    def sink_for(self, res: Any) -> _Sink:
        return _Sink(self, res)

    def __len__(self) -> int:
        return sum(len(r) for r in self.roots)

    def _take(self) -> tuple[np.ndarray, np.ndarray]:
        roots = np.concatenate(self.roots) if self.roots else np.zeros(0, _U64)
        vals = np.concatenate(self.vals) if self.vals else np.zeros(0, _U64)
        self.roots, self.vals = [], []
        return roots, vals

    def release(self) -> None:
        """Send every held message at the next flush (the state they depend on is committed).
        Also the store protocol's `release`, called after `take_messages`: nothing to drop then."""
        if self.roots:
            roots, vals = self._take()
            if self._out is not None:
                roots, vals = np.concatenate([self._out[0], roots]), np.concatenate([self._out[1], vals])
            self._out = (roots, vals)

    def fail_all(self, reason: Any) -> None:
        """Fail the trees of every held message instead (their spouts replay them)."""
        roots, _ = self._take()
        if len(roots):
            self._fails.append((np.unique(roots), reason))

    def take_messages(self) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, Any]], int, int]:
        """(ack roots, ack values, [(failed roots, reason)], 0, 0): what was released or failed."""
        roots, vals = self._out if self._out is not None else (np.zeros(0, _U64), np.zeros(0, _U64))
        fails, self._out, self._fails = self._fails, None, []
        return roots, vals, fails, 0, 0
