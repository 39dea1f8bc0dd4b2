"""pystorm's BatchingBolt and TicklessBatchingBolt, on squall's tick tuples.

Tuples are grouped by `group_key` and handed to `process_batch(key, tups)` on ticks: a
BatchingBolt every `ticks_between_batches` ticks of `topology.tick.tuple.freq.secs` (which
must be set, for it or the topology); a TicklessBatchingBolt every `secs_between_batches`
seconds of topology time (it asks for its own ticks at that rate: no timer thread, which a
bolt carried between waves could not keep). A batch whose `process_batch` raises fails (with
auto_fail) and is reported; the other batches go on.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from squall.api.config import Config
from squall.streamparse.components import Bolt, Tuple


class BatchingBolt(Bolt):
    """Groups tuples between ticks; `process_batch(key, tups)` for each group on a tick."""

    ticks_between_batches = 1
    _ack_after_process = False

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._batches: defaultdict[Any, list[Tuple]] = defaultdict(list)
        self._tick_counter = 0
        self._current_key: Any = None

    def prepare(self, conf: dict, context: Any, collector: Any) -> None:
        if not conf.get(Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS):
            raise ValueError(
                f"{type(self).__name__} {context.this_component_id!r} gets no tick tuples, so its batches would never "
                f"be processed: set {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS!r} in its spec's config (or the "
                "topology's), or make it a TicklessBatchingBolt with secs_between_batches")
        super().prepare(conf, context, collector)

    def group_key(self, tup: Tuple) -> Any:
        """The batch a tuple belongs to; None (the default): one batch."""
        return None

    def process_batch(self, key: Any, tups: list[Tuple]) -> None:
        raise NotImplementedError(f"bolt {self.component_name!r}: implement process_batch(key, tups)")

    def emit(self, tup: Any, **kwargs: Any) -> None:
        kwargs["need_task_ids"] = False
        return super().emit(tup, **kwargs)

    def process(self, tup: Tuple) -> None:
        self._batches[self.group_key(tup)].append(tup)

    def process_tick(self, tick_tup: Tuple) -> None:
        self._tick_counter += 1
        if self._tick_counter > self.ticks_between_batches and self._batches:
            self.process_batches()
            self._tick_counter = 0

    def process_batches(self) -> None:
        """`process_batch` for every group, then ack its tuples (auto_ack); a group whose
        `process_batch` raises is reported and its tuples fail (auto_fail)."""
        batches, self._batches = self._batches, defaultdict(list)
        for key, batch in batches.items():
            self._current_tups, self._current_key = batch, key
            try:
                self.process_batch(key, batch)
            except Exception as e:  # noqa: BLE001 - this batch fails, the others go on
                self.raise_exception(e, batch)
                if self.auto_fail:
                    self._settle(batch, self._collector.fail)
                continue
            finally:
                self._current_tups, self._current_key = [], None
            if self.auto_ack:
                self._settle(batch, self._collector.ack)

    @staticmethod
    def _settle(batch: list[Tuple], how: Any) -> None:
        for tup in batch:
            if tup.id._done == 0:  # not acked or failed by process_batch itself
                how(tup.id)


class TicklessBatchingBolt(BatchingBolt):
    """Processes its batches every `secs_between_batches` seconds of topology time."""

    secs_between_batches: float = 2

    def get_component_configuration(self) -> dict | None:
        return {Config.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.secs_between_batches}

    def process_tick(self, tick_tup: Tuple) -> None:
        if self._batches:
            self.process_batches()
