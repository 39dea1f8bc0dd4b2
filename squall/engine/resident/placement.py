"""Where a topology's tasks run: each in a slot of the pool (or, for a driver-bound spout, in
the driver), and loading the topology into the slots that hold its tasks."""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass
from typing import Any

from squall.api.config import Config
from squall.api.topology import StormTopology
from squall.engine.resident.messages import Setup

LOAD_SECS = 120.0  # how long a slot may take to load a topology (unpickle, open its spouts)


def driver_bound(obj: Any) -> bool:
    """A spout that must run in the driver (`DRIVER_BOUND = True` on its class)."""
    return bool(getattr(type(obj), "DRIVER_BOUND", False))


class TopologyStopped(RuntimeError):
    """The topology cannot go on: a slot could not load it, a task's slot died, and so on."""


class SlotFailed(Exception):
    """A slot of the topology died (or a peer lost its connection to it): roll back."""


@dataclass
class Placement:
    """Where every task of a topology runs."""

    spouts: dict[int, int]  # executor spout task -> slot
    bolts: dict[int, int]
    ackers: dict[int, int]
    driver_spouts: tuple[int, ...]

    @classmethod
    def of(cls, topology: StormTopology, slots: int, ackers: int) -> Placement:
        """Task i of a component in slot i mod slots (as Storm's even scheduler spreads executors);
        acker partitions from the last slot down, away from the first spout tasks."""
        spouts: dict[int, int] = {}
        bolts: dict[int, int] = {}
        driver: list[int] = []
        for comp, spec in topology.specs.items():
            for i, tid in enumerate(topology.task_ids[comp]):
                if spec.is_spout and driver_bound(spec.obj):
                    driver.append(tid)
                elif spec.is_spout:
                    spouts[tid] = i % slots
                else:
                    bolts[tid] = i % slots
        return cls(spouts, bolts, {k: (slots - 1 - k) % slots for k in range(ackers)}, tuple(sorted(driver)))

    def moved(self, dead: set[int], live: list[int]) -> Placement:
        """The tasks of the `dead` slots spread over the `live` ones, the others where they are."""
        i = 0

        def move(where: dict[int, int]) -> dict[int, int]:
            nonlocal i
            out = {}
            for t, s in sorted(where.items()):
                if s in dead:
                    s = live[i % len(live)]
                    i += 1
                out[t] = s
            return out

        return Placement(move(self.spouts), move(self.bolts), move(self.ackers), self.driver_spouts)

    def tasks_of(self, slot: int) -> list[tuple[str, int]]:
        return ([("spout", t) for t, s in self.spouts.items() if s == slot]
                + [("bolt", t) for t, s in self.bolts.items() if s == slot]
                + [("acker", k) for k, s in self.ackers.items() if s == slot])


class Placing:
    """The driver's part in placing a topology: its setup shipped to the slots, and loaded there."""

    def _setup_blob(self) -> bytes:
        from pyspark import cloudpickle  # noqa: PLC0415 - components may be lambdas or local classes

        p = self.placement
        strip = {self.topology.task_component[t] for t in p.driver_spouts}
        setup = Setup(self.topology.without_spout_instances(strip), dict(self.conf), self.capture, p.spouts,
                      p.bolts, p.ackers, p.driver_spouts, self._probe)
        self.spout_slots = setup.spout_slots
        self.acker_slots = setup.acker_slots
        try:
            return cloudpickle.dumps(setup)
        except Exception as e:
            raise TypeError(f"topology {self.name!r} cannot be shipped to the slots: {type(e).__name__}: {e}. Spouts "
                            "and bolts are pickled with cloudpickle: keep connections, locks and files out of their "
                            "attributes until open/prepare (or give the spout DRIVER_BOUND = True)") from e

    @staticmethod
    def _participants_of(p: Placement) -> list[int]:
        return sorted({*p.spouts.values(), *p.bolts.values(), *p.ackers.values()})

    def _load(self, blob: bytes, slots: list[int], recovering: bool = False) -> None:
        """Load the topology in `slots` (those that do not hold it yet), and wait until they have; in
        a recovery a slot's spouts may take a while to open (squall.spout.open.retry.secs)."""
        new = [s for s in slots if s not in self._loaded]
        self.participants = slots
        for s in new:  # in the message itself: a frame on the driver's links is tuple payload (wire.Meter)
            self.pool.slots[s].send(("load", self.uid, blob, recovering, self.active))
        limit = LOAD_SECS + (float(self.conf[Config.SQUALL_SPOUT_OPEN_RETRY_SECS]) if recovering else 0.0)
        deadline = time.monotonic() + limit
        while not set(new) <= self._loaded and self._crash is None:
            try:
                self._handle(*self.inbox.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                break
            if self._dead & set(new):  # it died loading (a host lost during a rollback): place again
                raise SlotFailed(sorted(self._dead))
        if self._crash is not None or not set(new) <= self._loaded:
            why = self._crash or (f"only {len(set(new) & self._loaded)} of {len(new)} slots loaded it within "
                                  f"{limit:.0f} s")
            raise TopologyStopped(f"topology {self.name!r} could not start on the slots: {why}")
