"""The lost-wave policy: what happens when a wave's whole job dies (a worker crash).

The first time, every root of the wave fails (reason "lost") and is replayed by its spout.
When a root that was lost before is in a lost wave again, the wave is split in halves,
recursively, so the roots that kill it are isolated and the others complete; a root lost
`squall.max.replays` times goes to the dead-letter sink with its error and is acked at its
spout: handled, never replayed forever.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from squall.engine.driver.wave import WaveLost, WaveOutput, merge_outputs
from squall.observe.errors import ErrorRecord
from squall.reliability.batch import TupleBatch, select_roots
from squall.reliability.pending import FailReason

log = logging.getLogger("squall")

RunJob = Callable[[list[tuple[int, TupleBatch]]], WaveOutput]  # runs one job; raises WaveLost


def msg_key(task: int, msg_id: Any) -> tuple[int, Any]:
    """(spout task, msg id) as a dict key, whatever the msg id is."""
    try:
        hash(msg_id)
        return task, msg_id
    except TypeError:
        return task, repr(msg_id)


class LostWaves:
    """Replay counts per (spout task, msg id) and the bisection of waves that keep dying.

    `replay_key(task, msg_id)`: what stays the same when a spout replays (Trident's spouts replay
    under a new attempt number). `dead_letter(root, task, msg_id)`: the coordinator forgets the
    root and acks it at its spout.
    """

    def __init__(self, name: str, max_replays: int, sink: Any, replay_key: Callable[[int, Any], Any],
                 dead_letter: Callable[[int, int, Any], None], record: Callable[[list[ErrorRecord]], None]):
        self.name = name
        self.max_replays = max_replays
        self.sink = sink
        self._replay_key = replay_key
        self._dead_letter = dead_letter
        self._record = record
        self.attempts: dict[tuple[int, Any], int] = {}
        # per wave not yet ended (more than one while waves are in flight): what its spout tasks
        # emitted, (component, task, roots, msg ids, values) each; indexed by root only when a
        # wave is lost (a dict entry per root, every wave, would cost every wave)
        self.wave_msgs: dict[int, list[tuple[str, int, Any, list, list]]] = {}
        self._by_root: dict[int, dict[int, tuple[int, Any, list, str]]] = {}
        self.dead_lettered = 0
        self.lost_waves = 0

    def remember(self, wave: int, component: str, task: int, roots: Any, msg_ids: list, values: list) -> None:
        """A wave's roots (an array or a list): what a dead letter would say about each."""
        self.wave_msgs.setdefault(wave, []).append((component, task, roots, msg_ids, values))
        self._by_root.pop(wave, None)

    def end_wave(self, wave: int) -> None:
        self.wave_msgs.pop(wave, None)
        self._by_root.pop(wave, None)

    def _msg(self, root: int) -> tuple[int, Any, list, str] | None:
        for wave, parts in self.wave_msgs.items():
            index = self._by_root.get(wave)
            if index is None:
                index = self._by_root[wave] = {
                    r: (task, m, v, component) for component, task, roots, msg_ids, values in parts
                    for r, m, v in zip(roots.tolist() if hasattr(roots, "tolist") else roots, msg_ids, values)}
            got = index.get(root)
            if got is not None:
                return got
        return None

    def acked(self, task: int, msg_id: Any) -> None:
        """A tree completed: its replay count starts over."""
        if self.attempts:
            self.attempts.pop(msg_key(task, self._replay_key(task, msg_id)), None)

    def acked_many(self, task: int, msg_ids: list) -> None:
        """`acked` for each (nothing to do, and no step per msg id, while no wave was lost)."""
        if self.attempts:
            for m in msg_ids:
                self.acked(task, m)

    def _key(self, root: int) -> tuple[int, Any] | None:
        got = self._msg(root)
        if got is None:
            return None
        return msg_key(got[0], self._replay_key(got[0], got[1]))

    def run(self, run_job: RunJob, next_wave: Callable[[], int], outputs: list[tuple[int, TupleBatch]],
            roots: np.ndarray, keep_untracked: bool = True) -> WaveOutput:
        """Run a wave's spout output; a lost job fails its roots, or is bisected (see above)."""
        try:
            return run_job(outputs)
        except WaveLost as e:
            return self.after_loss(e, run_job, next_wave, outputs, roots, keep_untracked)

    def after_loss(self, e: WaveLost, run_job: RunJob, next_wave: Callable[[], int],
                   outputs: list[tuple[int, TupleBatch]], roots: np.ndarray, keep_untracked: bool = True) -> WaveOutput:
        """The wave's job was lost (`e`): fail its roots, or bisect it and run the halves."""
        self.lost_waves += 1
        log.warning("%s: wave lost (%d roots): %s", self.name, len(roots), e)
        self._record([ErrorRecord.from_exception("__wave", -1, f"WaveLost: {e}", kind="lost")])
        suspects = any(self.attempts.get(self._key(r), 0) for r in roots.tolist())
        if len(roots) <= 1 or not suspects:
            return self._lost(roots, str(e))
        mid = len(roots) // 2
        parts = []
        for half, untracked in ((roots[:mid], keep_untracked), (roots[mid:], False)):
            sub = [(t, b2) for t, b in outputs if (b2 := select_roots(b, half, untracked)) is not None]
            if sub:
                next_wave()  # every job gets its own wave number (the carried state's version)
                parts.append(self.run(run_job, next_wave, sub, half, untracked))
        return merge_outputs(parts) if parts else WaveOutput()

    def _lost(self, roots: np.ndarray, error: str) -> WaveOutput:
        out = WaveOutput()
        for r in roots.tolist():
            key = self._key(r)
            n = self.attempts[key] = self.attempts.get(key, 0) + 1
            if n >= self.max_replays:
                self._write_dead_letter(r, n, error)
            else:
                out.fail_roots.append(r)
                out.fail_reasons.append(FailReason("lost", error=error))
        return out

    def _write_dead_letter(self, root: int, attempts: int, error: str) -> None:
        task, msg_id, values, component = self._msg(root)
        if hasattr(values, "as_list"):  # a row of a spout's column emit, made a list only now
            values = values.as_list()
        self.sink.write({"topology": self.name, "component": component, "task": task, "msg_id": msg_id,
                         "values": values, "attempts": attempts, "error": error})
        self.dead_lettered += 1
        self.attempts.pop(self._key(root), None)
        log.error("%s: %s[%d] msg %r dead-lettered after %d lost waves: %s", self.name, component, task,
                  msg_id, attempts, error)
        self._dead_letter(root, task, msg_id)
