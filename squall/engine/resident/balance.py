"""Load-aware shuffle across the Spark engine's slots, in the spirit of Storm 2's
LoadAwareShuffleGrouping: on unless `topology.disable.loadaware.messaging` is true (as in Storm).

Storm weighs each target task by how full its receive queue is. Here a wave's work is known per
slot when the wave ends (each report's `busy_secs`), so the driver weighs the slots to even that
work out: the slot that also runs a spout, an acker, or the heavier share of a fields grouping (work
no grouping can move) gets fewer of the shuffled tuples, the others more, and a slot on a slower or
busier host gets fewer too. Every marker carries the weights, by target task (each its slot's), and
the driver logs them with the wave; each task's shuffles are weighed with the weights of the wave
it steps (squall.engine.tasks.task.TaskBase.weigh), and a snapshot keeps them with the shuffles'
positions, so a wave run again after a rollback routes as it first ran (a Trident state behind a
shuffle, committed in one partition and not yet in the other, sees the same tuples again). Only
shuffle groupings move: fields, all, global and direct still go where they must.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from squall.api.config import Config
from squall.api.topology import StormTopology
from squall.engine.resident.messages import Report

GAIN = 0.1  # how far one wave moves a slot's weight toward evening out the work: small, so it settles
SMOOTHING = 0.2  # the newest wave's part in each slot's average work (one wave's is noisy)
LIMIT = 4.0  # a slot's weight stays within 1/LIMIT..LIMIT of the slots' average: none is starved
MIN_WORK_SECS = 0.0005  # a wave this light (all slots together) says nothing of the load
STEP = 0.05  # markers carry weights rounded to this, so the slots re-weigh only on a real change


class ShuffleBalance:
    """The driver's weights of its slots for shuffled tuples, learned from the waves' reports."""

    def __init__(self, targets: set[int]) -> None:
        self.targets = targets  # the tasks some shuffle sends to: only their slots' weights matter
        self.work: dict[int, float] = {}  # slot -> its average work a wave, seconds
        self.weights: dict[int, float] = {}  # slot -> its weight (average 1)
        self.shares: dict[int, float] | None = None  # rounded; markers carry them by task (task_weights); None: even

    @classmethod
    def of(cls, topology: StormTopology, conf: dict) -> ShuffleBalance | None:
        """A balance for a topology with a shuffle grouping, unless the user turned it off."""
        key = Config.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING
        if conf.get(key, Config.DEFAULTS[key]):
            return None
        targets = {t for subs in topology.subscribers.values() for sub, g in subs
                   if g.kind in ("shuffle", "none", "local_or_shuffle") for t in topology.task_ids[sub]}
        return cls(targets) if targets else None

    def wave_ended(self, reports: Iterable[Report], slot_of: Mapping[int, int]) -> None:
        """A wave ended: each slot that took part reported what its tasks spent on it (busy_secs);
        `slot_of` places the bolt tasks. A slot that holds none of the shuffles' targets takes no
        part: no weight of its own would move its work."""
        movable = {slot_of[t] for t in self.targets if t in slot_of}
        work: dict[int, float] = {}
        for r in reports:
            if r.slot in movable:
                work[r.slot] = work.get(r.slot, 0.0) + r.busy_secs
        if len(work) < 2 or sum(work.values()) < MIN_WORK_SECS:
            return
        self.work = {s: w if s not in self.work else self.work[s] + SMOOTHING * (w - self.work[s])
                     for s, w in work.items()}  # a slot that no longer takes part (it died) drops out
        mean = sum(self.work.values()) / len(self.work)
        weights = {}
        for s, w in self.work.items():
            ratio = mean / max(w, mean / LIMIT)
            weights[s] = self.weights.get(s, 1.0) * ratio ** GAIN
        scale = len(weights) / sum(weights.values())
        self.weights = {s: min(LIMIT, max(1 / LIMIT, w * scale)) for s, w in weights.items()}
        shares = {s: round(round(w / STEP) * STEP, 2) for s, w in self.weights.items()}
        self.shares = None if all(v == 1.0 for v in shares.values()) else shares

    def task_weights(self, slot_of: Mapping[int, int]) -> dict[int, float] | None:
        """What a wave's marker carries: each shuffle target's weight, its slot's (None: even).
        By task, not slot, so that a logged wave run again after its tasks moved routes the same."""
        if self.shares is None:
            return None
        return {t: self.shares.get(slot_of[t], 1.0) for t in sorted(self.targets) if t in slot_of}
