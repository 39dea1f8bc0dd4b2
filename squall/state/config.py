"""The state settings of a topology: which provider, its settings, the checkpoint interval;
checked at submit with errors that name the setting."""

from __future__ import annotations

import importlib.util
import math

from squall.api.components import InvalidTopologyException
from squall.api.config import Config
from squall.state.providers import MemoryProvider, SqliteProvider, StateProvider


def _providers() -> dict[str, type[StateProvider]]:
    from squall.state.postgres import PostgresProvider  # noqa: PLC0415
    from squall.state.redis_state import RedisProvider  # noqa: PLC0415

    return {"sqlite": SqliteProvider, "postgres": PostgresProvider, "redis": RedisProvider, "memory": MemoryProvider}


NEEDS = {"postgres": "dsn", "redis": "url"}  # the provider.config entry each one cannot do without


def checkpoint_secs(component: str, conf: dict) -> float:
    """The checkpoint interval (secs), checked: positive and below the message timeout."""
    ms = conf.get(Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL)
    key = Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms <= 0:
        raise InvalidTopologyException(
            f"stateful bolt {component!r}: {key} must be a positive number of ms, got {ms!r}")
    timeout = conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS)
    if conf.get(Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True) and timeout and ms >= float(timeout) * 1000:
        raise InvalidTopologyException(
            f"stateful bolt {component!r}: {key} = {ms} ms is not below {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS} = "
            f"{timeout} s; the inputs' acks wait for the next checkpoint, so they would time out and be replayed. "
            f"Lower {key} or raise {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS}")
    return float(ms) / 1000


def make_provider(component: str, conf: dict) -> StateProvider:
    """The provider the conf names, checked (unknown name, missing dsn/url)."""
    name = conf.get(Config.TOPOLOGY_STATE_PROVIDER) or "sqlite"
    kinds = _providers()
    if name not in kinds:
        raise InvalidTopologyException(
            f"stateful bolt {component!r}: {Config.TOPOLOGY_STATE_PROVIDER} = {name!r} is not a state provider; "
            f"use one of {sorted(kinds)}")
    pconf = conf.get(Config.TOPOLOGY_STATE_PROVIDER_CONFIG) or {}
    if not isinstance(pconf, dict):
        raise InvalidTopologyException(
            f"stateful bolt {component!r}: {Config.TOPOLOGY_STATE_PROVIDER_CONFIG} must be a dict "
            f"(path / dsn / url), got {pconf!r}")
    need = NEEDS.get(name)
    if need and not pconf.get(need):
        raise InvalidTopologyException(
            f"stateful bolt {component!r}: the {name} state provider needs {Config.TOPOLOGY_STATE_PROVIDER_CONFIG} "
            f"= {{{need!r}: ...}}, e.g. {{'{need}': '{_EXAMPLE[name]}'}}")
    module = _MODULES.get(name)
    if module is not None and importlib.util.find_spec(module) is None:
        raise InvalidTopologyException(
            f"stateful bolt {component!r}: the {name} state provider needs the {module!r} package; install "
            "squall's connectors extra (pip install 'squall[connectors]')")
    return kinds[name](pconf)


_MODULES = {"postgres": "psycopg", "redis": "redis"}
_EXAMPLE = {"postgres": "postgresql://postgres@127.0.0.1:5432/test", "redis": "redis://127.0.0.1:6379/0"}
