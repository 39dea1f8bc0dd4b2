"""What the driver and the slots say to each other about a topology's waves (squall.engine.resident).

Driver to slot: a `Marker` starts a wave. Slot to slot: level messages (a wave's batches for the
tasks of the receiving slot), `AckPart`s (to an acker's slot) and verdicts (to a spout task's
slot: squall.reliability.acker.Verdict). Slot to driver: one `Report` per wave. Every message
names its topology (`uid`) and epoch: a rollback moves the epoch on, and what an older epoch
sent is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from squall.engine.driver.wave import Captured
from squall.engine.tasks.spout_runner import SpoutFigures
from squall.engine.tasks.task_result import Counters
from squall.observe.errors import ErrorRecord
from squall.reliability.batch import TupleBatch
from squall.reliability.pending import FailReason

_EMPTY_U = np.zeros(0, np.uint64)

DRIVER = -1  # the sender index of the driver, which takes part in level 0 for driver-bound spouts


@dataclass
class Marker:
    """Wave `wave` starts: what each slot needs to run its part of it."""

    wave: int
    now: float | None  # the wave's time for bolts (`context.wave_time`): simulated secs, or None (wall clock)
    clock: float | None  # the topology clock for spout emit times and latencies: simulated, or None (wall clock)
    budgets: dict[int, int]  # spout task -> emits it may make (an active executor spout task; else none)
    inputs: list[tuple[int, TupleBatch]]  # ticks and $checkpoint tuples, by target task
    verdicts_through: int  # a spout task applies every verdict of the waves up to this one before it pulls
    rotate: int = 0  # timeout rotations each acker runs after it applied this wave
    snapshot: bool = False  # every task's state is written at the end of this wave
    confirmed: int = 0  # the newest snapshot every slot wrote (0: none yet)
    trim: dict[int, int] = field(default_factory=dict)  # spout task -> verdicts it had at that snapshot
    gated: frozenset[int] = frozenset()  # spout tasks whose acks wait for a snapshot that holds their effects
    rerun: int | None = None  # the kept wave whose batches the spouts send again, in place of pulling
    roots: np.ndarray | None = None  # with `rerun`: only these roots of it (a lost wave in halves)
    keep: frozenset[int] = frozenset()  # kept waves still to run again: not let go with the snapshot
    weights: dict[int, float] | None = None  # shuffle target task -> its weight (balance.py); None: even


@dataclass
class AckPart:
    """One slot's ack messages of a wave for one acker partition: the trees its spout tasks
    started (init values), the XOR values per root its tasks sent (folded per root), and the roots
    they failed, with the reason of each."""

    init_roots: np.ndarray = field(default_factory=lambda: _EMPTY_U)
    init_vals: np.ndarray = field(default_factory=lambda: _EMPTY_U)
    roots: np.ndarray = field(default_factory=lambda: _EMPTY_U)
    vals: np.ndarray = field(default_factory=lambda: _EMPTY_U)
    fail_roots: list[int] = field(default_factory=list)
    fail_reasons: list[FailReason] = field(default_factory=list)


@dataclass
class SnapshotInfo:
    """What a slot wrote at a snapshot wave: its file, and per spout task the wave whose verdicts
    it had applied (None: its instance does not pickle, so it cannot be restored)."""

    path: str
    nbytes: int
    spouts: dict[int, int | None] = field(default_factory=dict)
    secs: float = 0.0  # what writing it took


@dataclass
class Report:
    """A slot's part of one wave, for the driver: counts, not tuples."""

    wave: int
    slot: int
    tasks: list[tuple[str, int, Counters]] = field(default_factory=list)  # bolt tasks that ran here
    spouts: list[tuple[str, int, SpoutFigures]] = field(default_factory=list)
    emitted: int = 0  # spout tuples this wave (its spout tasks')
    full: bool = False
    capped: bool = False
    errors: list[ErrorRecord] = field(default_factory=list)
    errors_dropped: int = 0  # errors past the first few of the wave, counted only
    metrics: list[tuple[str, int, dict]] = field(default_factory=list)
    captured: Captured = field(default_factory=dict)
    pending: dict[int, int] = field(default_factory=dict)  # spout task -> trees pending
    acker_pending: int | None = None  # trees its acker partitions hold (None: it has none)
    held: int = 0  # acks its ackers hold until a snapshot
    snapshot: SnapshotInfo | None = None
    lost: str | None = None  # the wave did not run whole here (a batch not settled): why
    busy_secs: float = 0.0  # time its tasks took this wave
    executed: int = 0
    peer_bytes: int = 0  # what this slot's process sent the other slots so far (squall.engine.resident.wire.Meter)

    @property
    def acked(self) -> int:
        return sum(f.acked for _, _, f in self.spouts)

    @property
    def failed(self) -> int:
        return sum(f.failed for _, _, f in self.spouts)


@dataclass
class Rollback:
    """Every task of a topology back to snapshot `wave` (0: as the topology made them), with the
    tasks of dead slots placed anew (`setup`, cloudpickled). `sources` names the file that holds
    each task at that snapshot; `spouts` says, per spout task that moved (its slot died), the wave
    of the verdicts its snapshot had applied, or None when it is made anew (it could not be
    snapshotted). A live spout task is not rolled back: the driver runs its kept waves again."""

    wave: int
    setup: bytes
    sources: dict[tuple[str, int], str]  # ("bolt" | "spout" | "acker", id) -> snapshot file
    spouts: dict[int, int | None]  # moved spout task -> verdicts applied at its snapshot (None: made anew)
    through: int  # the last wave before the rollback: verdicts are counted again from there
    active: bool = True  # the topology is active: a spout made anew is activated after open (as Storm)


@dataclass
class Setup:
    """A topology as a slot loads it (cloudpickled): its components (driver-bound spouts without
    their instances), conf, where every task runs, and who sends what to whom."""

    topology: Any
    conf: dict
    capture: bool
    spouts: dict[int, int]  # executor spout task -> slot
    bolts: dict[int, int]  # bolt task -> slot
    ackers: dict[int, int]  # acker partition -> slot
    driver_spouts: tuple[int, ...]  # driver-bound spout tasks
    probe: str = ""  # what the driver wrote in the snapshot directory: a slot checks it sees it
    max_errors: int = 20  # error records a slot sends per wave (the rest are counted)

    @property
    def participants(self) -> list[int]:
        """The slots that take part in this topology's waves."""
        return sorted({*self.spouts.values(), *self.bolts.values(), *self.ackers.values()})

    @property
    def spout_slots(self) -> list[int]:
        """Where verdicts go: the slots of executor spout tasks (and DRIVER, for driver-bound ones)."""
        slots = sorted(set(self.spouts.values()))
        return slots + [DRIVER] if self.driver_spouts else slots

    @property
    def acker_slots(self) -> list[int]:
        return sorted(set(self.ackers.values()))
