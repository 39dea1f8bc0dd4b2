"""KeyValueState: what a stateful bolt reads and writes (Storm's KeyValueState).

The committed pairs of the task are loaded once (at init_state); changes since the last
checkpoint are kept aside and serialized at the checkpoint (prepare, then commit; rollback
drops them). A value that cannot be stored fails its `put`, in `execute`, naming the key: a
value other than a plain number, string or bytes is test-serialized at `put` for that.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from squall.state.providers import StateProvider

_PROTO = 4
_PLAIN = frozenset({int, float, str, bytes, bool, type(None)})


class _Deleted:
    """A deleted key in the changes; pickles as the module's one instance (the state crosses
    waves pickled on Spark, and `is _DELETED` must still hold there)."""

    def __reduce__(self) -> str:
        return "_DELETED"


_DELETED = _Deleted()


def dumps(v: Any) -> bytes:
    return pickle.dumps(v, _PROTO)


class StateValueError(TypeError):
    """A key or value that cannot be serialized into the state."""


class KeyValueState:
    """get(k, default=None), put(k, v), delete(k), items(); see the module docstring."""

    def __init__(self, provider: StateProvider, namespace: str, component: str = ""):
        self.provider = provider
        self.namespace = namespace
        self.component = component
        self._data: dict[Any, Any] = {}  # the current view: committed plus changes
        self._changes: dict[Any, Any] = {}  # key -> value put since the last commit (_DELETED: deleted)
        self.txid = 0  # the last committed txid
        self.loaded = False

    # -- what the bolt calls --------------------------------------------------------------

    def get(self, key: Any, default: Any = None) -> Any:
        return self._data.get(key, default)

    def put(self, key: Any, value: Any) -> None:
        if type(value) not in _PLAIN:  # a plain value always serializes: checked at the checkpoint only
            try:
                dumps(value)
            except Exception as e:
                raise StateValueError(
                    f"stateful bolt {self.component!r}: the value for key {key!r} cannot be stored in the state "
                    f"({type(e).__name__}: {e}); store plain data (numbers, strings, lists, dicts, tuples). "
                    "This tuple fails; the state keeps its previous value for that key") from e
        if key not in self._changes:  # a key seen since the last checkpoint was checked then
            self._check_key(key)
        self._data[key] = value
        self._changes[key] = value

    def _check_key(self, key: Any) -> None:
        try:
            hash(key)
            dumps(key)
        except Exception as e:
            raise StateValueError(
                f"stateful bolt {self.component!r}: the key {key!r} cannot be a state key ({type(e).__name__}: {e}); "
                "use a string, a number or a tuple of them") from e

    def delete(self, key: Any) -> None:
        self._check_key(key)
        self._data.pop(key, None)
        self._changes[key] = _DELETED

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self._data.items()))

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Any) -> bool:
        return key in self._data

    # -- the checkpoint (called by the executor, on the $checkpoint stream) ---------------

    def init(self) -> None:
        """INITSTATE: drop anything prepared but not committed, load the committed pairs."""
        raw, self.txid = self.provider.load(self.namespace)
        self._data = {pickle.loads(k): pickle.loads(v) for k, v in raw.items()}
        self._changes = {}
        self.loaded = True

    @property
    def dirty(self) -> bool:
        return bool(self._changes)

    def _wire(self) -> dict[bytes, bytes | None]:
        """The changes serialized (values as they are now, as Storm serializes at prepare)."""
        return {dumps(k): None if v is _DELETED else dumps(v) for k, v in self._changes.items()}

    def prepare_commit(self, txid: int) -> None:
        self.provider.prepare(self.namespace, txid, self._wire())

    def commit(self, txid: int) -> None:
        self.provider.commit(self.namespace, txid, self._wire())
        self.txid = txid
        self._changes = {}

    def rollback(self) -> None:
        """Drop the changes since the last commit (and what the store prepared): back to the
        committed pairs, read again from the store."""
        self.init()
