"""Checkpoints that cut a topology's lineage, and what old ones leave behind.

Every CHECKPOINT_EVERY_WAVES waves each level's cached output (the bolt instances and the
wave's records) is checkpointed, so later waves' lineage (what Spark runs again to rebuild a
lost cached block) stops there. Two kinds (`squall.spark.checkpoint`):

- **local** (the default when every task runs in the driver's JVM: `local`, `local[N]`,
  `local[N,F]`): Spark's localCheckpoint. The cached blocks themselves become the checkpoint
  (kept in memory, spilled to disk when memory runs short); nothing is written. On such a
  master a block can only be lost with the driver, and then the topology is gone anyway. The
  reliable kind wrote every level's output to files after the wave's job, in that job's thread:
  at a steady 5,000 sentences/s every 25th wave took ~200 ms longer, which was the whole p99
  (262-308 ms against 151-157 ms local, alternating runs).
- **reliable** (the default on a cluster, `local-cluster[...]` included: an executor lost takes
  its blocks with it): Spark's checkpoint, files in the checkpoint directory.

Once a later checkpoint is done, waves build on it and an older one is never read again; the
last KEEP are kept all the same (a job submitted before the newest was done may still be planned
on the one before it). Older ones are removed: their files (Spark never removes them itself,
unless `spark.cleaner.referenceTracking.cleanCheckpoints`, and then only when the JVM happens to
collect the RDD: a word-count bench's directory held 7.8 MB after ~40 s, growing), or their
cached blocks (which the executor otherwise unpersists as soon as a newer wave is good).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from squall.api.config import Config
from squall.engine.spark.host_local import tasks_in_driver_jvm

log = logging.getLogger("squall")

KEEP = 2
KINDS = ("auto", "local", "reliable")


def checkpoint_kind(conf: dict, master: str) -> str:
    """`local` or `reliable`, from `squall.spark.checkpoint` (auto: local when every task runs in
    the driver's JVM)."""
    kind = conf.get(Config.SQUALL_SPARK_CHECKPOINT) or "auto"
    if kind not in KINDS:
        raise ValueError(f"{Config.SQUALL_SPARK_CHECKPOINT!r} is {kind!r}: use one of {', '.join(map(repr, KINDS))}")
    if kind == "local" and not tasks_in_driver_jvm(master):
        raise ValueError(f"{Config.SQUALL_SPARK_CHECKPOINT!r} 'local' on master {master!r}: an executor lost "
                         "would take the only copy of its tasks' state with it; use 'reliable' (or 'auto')")
    if kind == "auto":
        return "local" if tasks_in_driver_jvm(master) else "reliable"
    return kind


class Checkpoints:
    """Marks a checkpointed wave's outputs, and keeps what the last KEEP checkpoints need."""

    def __init__(self, sc: Any, kind: str):
        self.sc = sc
        self.kind = kind
        self._kept: deque[list[Any]] = deque()  # per checkpoint: its files (reliable) or its outputs (local)
        self.written = 0  # checkpointed outputs (one per level per checkpointed wave)
        self.removed = 0

    def mark(self, out: Any) -> None:
        """Checkpoint `out` once the job that computes it ends (from the cache, in that job)."""
        if self.kind == "local":
            out.localCheckpoint()
        else:
            out.checkpoint()

    def written_for(self, outs: list[Any]) -> None:
        """The job of a checkpointed wave succeeded: its levels' checkpoints are done."""
        kept = list(outs) if self.kind == "local" else [p for p in (out.getCheckpointFile() for out in outs) if p]
        self.written += len(kept)
        self._kept.append(kept)
        while len(self._kept) > KEEP:
            for old in self._kept.popleft():
                self._remove(old)

    def holds(self, out: Any) -> bool:
        """Whether `out` is a local checkpoint still kept (its blocks must stay)."""
        return self.kind == "local" and any(out is o for outs in self._kept for o in outs)

    def close(self) -> None:
        """The topology is gone: local checkpoints' blocks go (files stay with the directory)."""
        if self.kind == "local":
            while self._kept:
                for out in self._kept.popleft():
                    out.unpersist(blocking=False)

    def _remove(self, old: Any) -> None:
        if self.kind == "local":
            old.unpersist(blocking=False)
            self.removed += 1
        else:
            self._delete(old)

    def _delete(self, path: str) -> None:
        """Through Hadoop's FileSystem: the checkpoint directory may be on HDFS or S3 as well as local."""
        jvm = self.sc._jvm
        try:
            p = jvm.org.apache.hadoop.fs.Path(path)
            p.getFileSystem(self.sc._jsc.hadoopConfiguration()).delete(p, True)
            self.removed += 1
        except Exception as e:  # noqa: BLE001 - a file left behind must not stop the topology
            log.warning("could not remove the old checkpoint %s: %s", path, e)
