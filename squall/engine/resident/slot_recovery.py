"""A slot's snapshots and rollbacks (docs/design.md): every task here written to one file per
snapshot wave, and restored from the files of the confirmed snapshot after a slot died."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from squall.engine.resident.messages import Rollback, SnapshotInfo
from squall.engine.resident.slot_ackers import merge_verdicts
from squall.engine.resident.snapshots import SnapshotFile
from squall.engine.tasks.fixed_parts import FixedPart
from squall.engine.tasks.task_host import TaskHost
from squall.reliability.acker import AckerPartition, Verdict

if TYPE_CHECKING:
    from squall.engine.resident.slot_topology import WaveState

log = logging.getLogger("squall")



class SlotRecovery:
    """Snapshots and rollbacks of a slot's topology (a part of SlotTopology)."""

    def _snapshot(self, ws: WaveState) -> SnapshotInfo:
        t0 = time.perf_counter()
        bolts = {}
        for tid, (blob, fixed) in ws.bolt_snaps.items():
            if fixed is not None:
                if fixed.token not in self._fixed_written and fixed.blob is not None:
                    self.store.write_fixed(fixed.token, fixed.blob)
                    self._fixed_written.add(fixed.token)
                fixed = FixedPart(fixed.token, None, fixed.made)
            bolts[tid] = (blob, fixed)
        snap = SnapshotFile(ws.n, bolts, dict(ws.spout_snaps), dict(ws.acker_snaps))
        path, nbytes = self.store.write(ws.n, self.slot.index, snap)
        return SnapshotInfo(path, nbytes, {tid: (None if b is None else applied)
                                           for tid, (b, applied) in ws.spout_snaps.items()},
                            time.perf_counter() - t0 + ws.snap_secs)

    def _rollback(self, epoch: int, plan: Rollback) -> None:
        """Back to snapshot `plan.wave` (docs/design.md): every bolt task and acker partition here
        restored from its file (or made anew), spout tasks that moved here restored or opened, live
        spout tasks left as they are; then the messages of the new epoch that came early."""
        self.epoch = epoch
        self.active = plan.active
        self.waves.clear()
        self.acker_waves.clear()
        self.verdicts_heard.clear()
        self.verdicts_through = plan.through
        live = dict(self.runners)
        self._place(self.loads(plan.setup))
        files: dict[str, SnapshotFile] = {}

        def snap(key: tuple[str, int]) -> SnapshotFile | None:
            path = plan.sources.get(key)
            if path is None:
                return None
            if path not in files:
                files[path] = self.store.read(path)
            return files[path]

        self.host = TaskHost(self.topology, self.setup.conf, self.setup.capture)
        for tid in self._bolts_here:
            f = snap(("bolt", tid))
            if f is None or tid not in f.bolts:
                continue  # made anew on first use
            blob, fixed = f.bolts[tid]
            if fixed is not None:
                fixed = FixedPart(fixed.token, self.store.read_fixed(fixed.token), fixed.made)
            self.host.restore(tid, blob, self.loads, fixed, f.wave)
        self.ackers = {}
        for k in self._ackers_here:
            f = snap(("acker", k))
            self.ackers[k] = self.loads(f.ackers[k]) if f is not None and k in f.ackers else \
                AckerPartition(k, self._nackers)
        self.runners = {}
        for tid in self._spouts_here:
            if tid in live:
                self.runners[tid] = live[tid]
                continue
            f = snap(("spout", tid))
            blob = f.spouts.get(tid, (None, 0))[0] if f is not None else None
            self.runners[tid] = self._restore_spout(tid, blob) if blob is not None else \
                self._open_spout(tid, self._open_retry_secs())
        self._set_active(self.active)  # a restored spout as the topology is now, not as at its snapshot
        for tid in set(self.kept_tasks()) - set(self.runners):
            self._forget_kept(tid)
        self._resend_verdicts(plan)
        early, self.stash = [m for m in self.stash if m[2] == epoch], [m for m in self.stash if m[2] > epoch]
        for m in early:
            self.handle(m[0], m)

    def _resend_verdicts(self, plan: Rollback) -> None:
        """To each spout task that moved, the verdicts its snapshot did not have yet (none to one
        made anew: its old trees are forgotten)."""
        for acker in self.ackers.values():
            for tid, applied in plan.spouts.items():
                if applied is None:
                    acker.forget_owner(tid)
                    continue
                again = acker.resend(tid, applied)
                if again:
                    merged = Verdict()
                    for _, v in again:
                        merged = merge_verdicts(merged, v)
                    self.slot.send(self.spout_slot[tid], ("resend", self.uid, self.epoch, tid, {tid: merged}))
