"""Stateful bolts (Storm's IStatefulBolt): a KeyValueState per task, saved at checkpoints on
the `$checkpoint` stream with prepare/commit/rollback, in SQLite (default), PostgreSQL, Redis
or memory. Inputs are acked only after the state changes they caused are committed."""

from squall.api.checkpoint import CHECKPOINT_STREAM_ID, is_checkpoint
from squall.state.bolt import BaseStatefulBolt
from squall.state.kv import KeyValueState, StateValueError
from squall.state.providers import MemoryProvider, SqliteProvider, StateProvider, default_sqlite_path

__all__ = [
    "CHECKPOINT_STREAM_ID",
    "BaseStatefulBolt",
    "KeyValueState",
    "MemoryProvider",
    "SqliteProvider",
    "StateProvider",
    "StateValueError",
    "default_sqlite_path",
    "is_checkpoint",
]
