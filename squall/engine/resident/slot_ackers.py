"""A slot's acker partitions: a wave's ack parts come in from every slot (and the driver), are
applied once all are in, and the verdicts go to each spout task's slot."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from squall.engine.resident.messages import AckPart, Marker
from squall.reliability.acker import Verdict

if TYPE_CHECKING:
    from squall.engine.resident.slot_topology import WaveState

_EMPTY_U = np.zeros(0, np.uint64)


@dataclass
class AckerWave:
    """Wave n's ack parts as an acker slot gets them."""

    parts: dict[int, dict[int, AckPart]] = field(default_factory=dict)  # sender -> acker -> part
    marker: Marker | None = None


class SlotAckers:
    """The acker side of a slot's topology (a part of SlotTopology)."""

    def _init(self, ws: WaveState, roots: np.ndarray, vals: np.ndarray) -> None:
        if self._nackers == 1:
            ws.init.setdefault(0, []).append((roots, vals))
            return
        k = (roots % np.uint64(self._nackers)).astype(np.int64)
        for a in np.unique(k).tolist():
            mine = k == a
            ws.init.setdefault(a, []).append((roots[mine], vals[mine]))

    def _acks(self, ws: WaveState, roots: np.ndarray, vals: np.ndarray) -> None:
        if self._nackers <= 1:
            ws.roots.setdefault(0, []).append(roots)
            ws.vals.setdefault(0, []).append(vals)
            return
        k = (roots % np.uint64(self._nackers)).astype(np.int64)
        for a in np.unique(k).tolist():
            mine = k == a
            ws.roots.setdefault(a, []).append(roots[mine])
            ws.vals.setdefault(a, []).append(vals[mine])

    def _apply_ackers(self) -> bool:
        """Apply every wave whose parts are all in, in order; True if one was."""
        did = False
        senders = len(self.participants) + (1 if self.setup.driver_spouts else 0)
        while self.acker_waves:
            n = min(self.acker_waves)
            aw = self.acker_waves[n]
            if aw.marker is None or len(aw.parts) < senders:
                break
            ws = self.waves.get(n)
            if ws is None or not ws.ended:
                break  # this slot's own part first (its report carries both)
            del self.acker_waves[n]
            t0 = time.perf_counter()
            m = aw.marker
            verdicts: dict[int, Verdict] = {}
            for k, acker in self.ackers.items():
                parts = [p[k] for p in aw.parts.values() if k in p]
                got = acker.apply(n, *_joined(parts), rotate=m.rotate, confirmed=m.confirmed, gated=m.gated,
                                  trim=m.trim)
                for owner, v in got.items():
                    verdicts[owner] = merge_verdicts(verdicts.get(owner), v)
            by_slot: dict[int, dict[int, Verdict]] = {s: {} for s in self.spout_slots}
            for owner, v in verdicts.items():
                slot = self.spout_slot.get(owner)
                if slot is not None:
                    by_slot[slot][owner] = v
            for slot, parts in by_slot.items():
                self.slot.send(slot, ("verdicts", self.uid, self.epoch, n, self.slot.index, parts))
            ws.report.busy_secs += time.perf_counter() - t0  # the load-aware shuffle weighs it
            if m.snapshot:
                t1 = time.perf_counter()
                ws.acker_snaps = {k: self.dumps(a) for k, a in self.ackers.items()}
                ws.snap_secs += time.perf_counter() - t1
            ws.applied = True
            did = True
        return did


def _joined(parts: list[AckPart]) -> tuple:
    def cat(arrays: list[np.ndarray]) -> np.ndarray:
        arrays = [a for a in arrays if len(a)]
        return np.concatenate(arrays) if len(arrays) > 1 else arrays[0] if arrays else _EMPTY_U

    fail_roots = [r for p in parts for r in p.fail_roots]
    return (cat([p.init_roots for p in parts]), cat([p.init_vals for p in parts]), cat([p.roots for p in parts]),
            cat([p.vals for p in parts]), np.array(fail_roots, np.uint64), [w for p in parts for w in p.fail_reasons])


def merge_verdicts(a: Verdict | None, b: Verdict) -> Verdict:
    if a is None:
        return b
    return Verdict(np.concatenate([a.completed, b.completed]), np.concatenate([a.failed, b.failed]),
                   a.reasons + b.reasons)
