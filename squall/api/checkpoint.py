"""The `$checkpoint` stream, as Storm names it: the tuples that drive a stateful bolt's
prepare/commit/rollback. squall's coordinator sends them (Storm's CheckpointSpout role)."""

from __future__ import annotations

from typing import Any

CHECKPOINT_STREAM_ID = "$checkpoint"
CHECKPOINT_COMPONENT_ID = "$checkpointspout"
CHECKPOINT_TASK_ID = -2
CHECKPOINT_FIELDS = ("txid", "action")
CHECKPOINTED = "squall.state.checkpointed"  # a stateful bolt's component conf: it gets $checkpoint tuples
PREPARE, COMMIT, ROLLBACK, INITSTATE = "PREPARE", "COMMIT", "ROLLBACK", "INITSTATE"


def is_checkpoint(t: Any) -> bool:
    """True for a tuple of the `$checkpoint` stream."""
    return t.source_component == CHECKPOINT_COMPONENT_ID and t.source_stream == CHECKPOINT_STREAM_ID
