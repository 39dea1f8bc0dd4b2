"""What the driver keeps of each resident task to rebuild it: its last confirmed snapshot and every
step it took since (the inputs it ran, in order), each step logged once its slot answered it.

A slot that dies takes its tasks' state with it. The task is rebuilt from its snapshot, and its
logged steps run again (their output thrown away): the state it had after its last answered step.
A wave that is lost (or dropped, being after a lost one) must leave no trace, so its steps are
taken out of the log (`drop_after`) and the tasks that had taken one are rebuilt the same way.
A snapshot is taken at a wave's step; a rebuild starts from the newest one left, and runs again
only the steps after it. Once that wave is settled good the snapshot is confirmed (`confirm`):
the steps up to it are then let go.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from squall.engine.fixed_parts import FixedPart

# (wave, pickled carried state, fixed attributes with their bytes or None)
Snapshot = tuple[int, bytes, FixedPart | None]


@dataclass
class Step:
    wave: int
    now: float | None
    blobs: list[bytes]  # the pickled input batches the task ran (none: a snapshot-only step)
    snap: Snapshot | None = None

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.blobs)


@dataclass
class TaskLog:
    """One task's snapshot and steps since. `base` None: the task as the topology made it."""

    base: Snapshot | None = None
    steps: list[Step] = field(default_factory=list)
    held_bytes: int = 0
    _fixed: dict[int, bytes] = field(default_factory=dict)  # token -> bytes of the current fixed attributes

    def answered(self, wave: int, now: float | None, blobs: list[bytes],
                 snap: tuple[bytes, FixedPart | None] | None) -> None:
        snapshot = None
        if snap is not None:
            state, fixed = snap
            if fixed is not None:
                if fixed.blob is not None:
                    self._fixed = {fixed.token: fixed.blob}
                fixed = FixedPart(fixed.token, self._fixed.get(fixed.token), fixed.made)
            snapshot = (wave, state, fixed)
        step = Step(wave, now, blobs, snapshot)
        self.steps.append(step)
        self.held_bytes += step.size

    def confirm(self, wave: int) -> None:
        """Wave `wave` is settled good: the newest snapshot up to it becomes the base."""
        for i in range(len(self.steps) - 1, -1, -1):
            step = self.steps[i]
            if step.wave <= wave and step.snap is not None:
                self.base = step.snap
                del self.steps[: i + 1]
                self.held_bytes = sum(s.size for s in self.steps)
                return

    def drop_after(self, wave: int) -> bool:
        """Forget the steps of waves after `wave`; whether there were any (the task must be rebuilt)."""
        keep = [s for s in self.steps if s.wave <= wave]
        if len(keep) == len(self.steps):
            return False
        self.steps = keep
        self.held_bytes = sum(s.size for s in keep)
        return True

    def rebuild(self, tid: int) -> tuple[int, Snapshot | None, list[tuple[int, float | None, list[bytes]]]]:
        """The `restore` item that gives the task back its state after its last logged step: from
        the newest snapshot it has (one not confirmed yet is as good: it is the state after its
        step, and a rollback took out the steps, snapshots and all, of waves that must not count),
        then the steps after it, run again."""
        base, after = self.base, self.steps
        for i in range(len(self.steps) - 1, -1, -1):
            if self.steps[i].snap is not None:
                base, after = self.steps[i].snap, self.steps[i + 1:]
                break
        return tid, base, [(s.wave, s.now, s.blobs) for s in after if s.blobs]
