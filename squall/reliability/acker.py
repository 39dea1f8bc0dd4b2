"""One acker partition (Storm's acker executor) as it runs beside other tasks: it gets a wave's
messages for its roots (`root % ackers`) from every task at once, applies the waves in order to
its XOR ledger, and says per spout task which trees completed and which failed.

Two things Storm's acker does not need:
- **Acks that wait for a snapshot.** A spout task that cannot be restored from a snapshot (its
  instance does not pickle: it holds a connection) is *gated*: the acks of its trees are held
  until a snapshot that holds their effects is confirmed (`confirmed` >= the wave they completed
  in), so an acked message's effects are never lost with a rollback. Fails are not held.
- **Verdicts kept until the spout's snapshot holds them.** A spout task restored from its snapshot
  had applied the verdicts of the waves up to some wave; the verdicts sent after it would be lost
  with it, so they are kept (`sent`) until a confirmed snapshot of the spout has them (`trim`),
  and sent again after a restore (`resend`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from squall.reliability.ids import root_owner
from squall.reliability.ledger import AckerLedger
from squall.reliability.pending import TIMEOUT, FailReason

_EMPTY_U = np.zeros(0, np.uint64)


@dataclass
class Verdict:
    """Trees of one spout task that completed, and that failed (with the reason of each)."""

    completed: np.ndarray = field(default_factory=lambda: _EMPTY_U)
    failed: np.ndarray = field(default_factory=lambda: _EMPTY_U)
    reasons: list[FailReason] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.completed) + len(self.failed)


class AckerPartition:
    """Acker partition `k` of `ackers`: its ledger, held acks and verdicts kept for a restore."""

    def __init__(self, k: int, ackers: int):
        self.k = k
        self.ledger = AckerLedger(ackers, k)
        self.held: list[tuple[int, np.ndarray]] = []  # (wave completed in, roots) of gated spout tasks
        self.sent: dict[int, list[tuple[int, Verdict]]] = {}  # spout task -> (wave, verdict) since its trim mark
        self.applied = 0  # the last wave applied

    def __len__(self) -> int:
        return len(self.ledger)

    @property
    def held_count(self) -> int:
        return sum(len(r) for _, r in self.held)

    def apply(self, wave: int, init_roots: np.ndarray, init_vals: np.ndarray, roots: np.ndarray, vals: np.ndarray,
              fail_roots: np.ndarray, fail_reasons: list[FailReason], rotate: int = 0, confirmed: int = 0,
              gated: frozenset[int] = frozenset(), trim: dict[int, int] | None = None) -> dict[int, Verdict]:
        """Wave `wave`'s messages (after those of every wave before it), then `rotate` timeout
        rotations; the verdicts per spout task (only those with one)."""
        v = self.ledger.apply(init_roots, init_vals, roots, vals, fail_roots)
        failed = [v.failed]
        reasons: dict[int, FailReason] = {}
        for r, why in zip(fail_roots.tolist(), fail_reasons):
            reasons.setdefault(r, why)
        for _ in range(rotate):
            expired = self.ledger.rotate()
            if len(expired):
                failed.append(expired)
                for r in expired.tolist():
                    reasons.setdefault(r, TIMEOUT)
        completed = self._gate(wave, v.completed, confirmed, gated)
        failed_all = np.concatenate(failed) if len(failed) > 1 else failed[0]
        out = _by_owner(completed, failed_all, reasons)
        for owner, verdict in out.items():
            self.sent.setdefault(owner, []).append((wave, verdict))
        self.trim(trim or {})
        self.applied = wave
        return out

    def _gate(self, wave: int, completed: np.ndarray, confirmed: int, gated: frozenset[int]) -> np.ndarray:
        """Completed roots of gated spout tasks wait; those whose wave a confirmed snapshot covers go."""
        if gated and len(completed):
            wait = np.isin(root_owner(completed), np.fromiter(gated, np.int64, len(gated)))
            if wait.any():
                self.held.append((wave, completed[wait]))
                completed = completed[~wait]
        if self.held and self.held[0][0] <= confirmed:
            go = [r for w, r in self.held if w <= confirmed]
            self.held = [(w, r) for w, r in self.held if w > confirmed]
            completed = np.concatenate([completed, *go])
        return completed

    def trim(self, through: dict[int, int]) -> None:
        """Forget the verdicts a confirmed snapshot of their spout task holds."""
        for owner, upto in through.items():
            kept = self.sent.get(owner)
            if kept and kept[0][0] <= upto:
                self.sent[owner] = [(w, x) for w, x in kept if w > upto]

    def resend(self, owner: int, after: int) -> list[tuple[int, Verdict]]:
        """The verdicts for spout task `owner` of the waves after `after` (it was restored from a
        snapshot that had applied those up to `after`)."""
        return [(w, x) for w, x in self.sent.get(owner, []) if w > after]

    def forget_owner(self, owner: int) -> None:
        """A spout task made anew (not restored): nothing it was owed is kept for it, and its old
        instance's trees are dropped (neither acked nor failed: the broker delivers them again)."""
        self.sent.pop(owner, None)
        self.ledger.windows.pop(owner, None)


def _by_owner(completed: np.ndarray, failed: np.ndarray, reasons: dict[int, FailReason]) -> dict[int, Verdict]:
    out: dict[int, Verdict] = {}
    if len(completed):
        owners = root_owner(completed)
        for o in np.unique(owners).tolist():
            out[o] = Verdict(completed[owners == o])
    if len(failed):
        owners = root_owner(failed)
        why = FailReason("failed")
        for o in np.unique(owners).tolist():
            mine = failed[owners == o]
            v = out.setdefault(o, Verdict())
            v.failed = mine
            v.reasons = [reasons.get(r, why) for r in mine.tolist()]
    return out
