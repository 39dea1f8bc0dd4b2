"""One task of a spout, on the driver: its instance and collector; turns a wave's emits into
output batches and the roots of the trees they start."""

from __future__ import annotations

from typing import Any

import numpy as np

from squall.api.collectors import SpoutOutputCollector
from squall.api.topology import StormTopology
from squall.engine.outputs import group_children
from squall.engine.task import TaskBase
from squall.engine.task_result import TaskResult
from squall.reliability.emits import EmitIndex
from squall.reliability.roots import spout_trees

_EMPTY_U = np.zeros(0, np.uint64)


class SpoutTask(TaskBase):
    """One task of a spout, on the driver: calls next_tuple and turns emits into root trees."""

    def __init__(self, topology: StormTopology, component: str, task_index: int, conf: dict, instance: Any,
                 capture: bool = False):
        super().__init__(topology, component, task_index, conf, capture)
        self.spout = instance
        self.collector = SpoutOutputCollector(component, self.streams, self)
        self.opened = False
        self.active = True
        self.last_values: list[list] = []

    def open(self) -> None:
        if not self.opened:
            self.opened = True
            self.spout.open(self.conf, self.context, self.collector)

    def begin(self) -> TaskResult:
        # Emits made between waves (in open, ack or fail: a replay) stay recorded: they go out in this wave.
        res = self._res = self._new_result()
        return res

    def end(self, roots_for: Any, tracking: bool) -> tuple[TaskResult, list, np.ndarray, np.ndarray]:
        """Turn this wave's emits into output batches, giving each emit with a msg id a root.

        roots_for(k) hands out k root ids. Returns (result, msg ids of the emits that had one,
        their roots, their init values); without tracking the roots are empty.
        """
        res = self._res
        self._res = None
        emits = self.collector.take_recorded()
        res.emitted = len(emits)
        if res.captured is not None:
            self._capture(res, emits)
        if not emits:
            self.last_values = []
            return res, [], _EMPTY_U, _EMPTY_U
        streams, values, mids, targets = zip(*emits)
        ix = EmitIndex.of_spout(values, streams, targets)
        trees = spout_trees(mids, ix.child_emit, ix.child_target, roots_for, tracking)
        res.outputs.extend(group_children(self.component, self.task_id, len(self.streams), ix, trees.child_anchors))
        self.last_values = [values[j] for j in trees.tracked_emits]  # kept for the dead-letter sink
        return res, trees.msg_ids, trees.roots, trees.init_vals
