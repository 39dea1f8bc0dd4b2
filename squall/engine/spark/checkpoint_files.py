"""Spark's checkpoint files of old waves, removed once nothing can read them.

Every CHECKPOINT_EVERY_WAVES waves each level's cached output (the bolt instances and the
wave's records) is checkpointed to cut the lineage. Spark never removes checkpoint files
itself (unless `spark.cleaner.referenceTracking.cleanCheckpoints`, and then only when the JVM
happens to collect the RDD), so the checkpoint directory grew for as long as a topology ran:
the word-count bench's held 6 checkpointed outputs (7.8 MB) after ~40 s, 14 ~25 s later.
Once a later checkpoint is written, waves build on it and an older one is never read again;
the last KEEP are kept all the same (a job submitted before the newest was written may still
be planned on the one before it).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

log = logging.getLogger("squall")

KEEP = 2


class CheckpointFiles:
    """The checkpoint files of the last KEEP checkpointed waves; older ones are deleted."""

    def __init__(self, sc: Any):
        self.sc = sc
        self._kept: deque[list[str]] = deque()
        self.written = 0  # checkpointed outputs (one per level per checkpointed wave)
        self.removed = 0

    def written_for(self, outs: list[Any]) -> None:
        """The job of a checkpointed wave succeeded: its levels' files are written."""
        paths = [p for p in (out.getCheckpointFile() for out in outs) if p]
        self.written += len(paths)
        self._kept.append(paths)
        while len(self._kept) > KEEP:
            for path in self._kept.popleft():
                self._delete(path)

    def _delete(self, path: str) -> None:
        """Through Hadoop's FileSystem: the checkpoint directory may be on HDFS or S3 as well as local."""
        jvm = self.sc._jvm
        try:
            p = jvm.org.apache.hadoop.fs.Path(path)
            p.getFileSystem(self.sc._jsc.hadoopConfiguration()).delete(p, True)
            self.removed += 1
        except Exception as e:  # noqa: BLE001 - a file left behind must not stop the topology
            log.warning("could not remove the old checkpoint %s: %s", path, e)
