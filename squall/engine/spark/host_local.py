"""Refusing host-local resources on a Spark cluster, at submit.

On `local[...]` every task runs on the driver's host, so a SQLite file or a temp snapshot
directory is one place. On a cluster each would silently become one file per host (whichever ran
the task), or a directory other hosts cannot read. So when the master is not `local[...]`, submit
refuses (driver-bound spouts run on the driver, so what they hold -- Trident's batch metadata in
a SQLite file, say -- stays on one host: the caller passes the other components):

- any bolt or executor spout, or object one holds (a Trident state factory, a stateful bolt's
  provider), whose class says `HOST_LOCAL = True` (duck-typed: SQLite state; `squall.state`
  providers declare it too), unless its `path` is under a declared shared path;
- no `squall.checkpoint.dir` (the slots' snapshots are there; whether every host sees the same
  directory is checked by each slot when it loads the topology: squall.engine.resident.snapshots).

The dead-letter file is not refused: only the driver writes it. A path is shared when it is under
one of `squall.shared.paths` (a list, or a comma-separated string, of mount points every host
sees: NFS and the like); a URI of a distributed filesystem (hdfs://, s3a://, ...) is shared for a
state's path. Trident's MemoryMapState is allowed: on Spark its dict lives in the driver
(squall.trident.service), one copy whatever host runs the task.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from squall.api.config import Config

SHARED_PATHS = Config.SQUALL_SHARED_PATHS
CHECKPOINT_DIR = Config.SQUALL_CHECKPOINT_DIR

ALTERNATIVES = ("use PostgreSQL or Redis state (PostgresMapState, RedisMapState), or put the file on storage "
                f"every host sees and declare it in {SHARED_PATHS!r} (e.g. ['/mnt/shared'])")


class HostLocalResourceError(ValueError):
    """A topology would write host-local files on a Spark cluster."""


def is_local_master(master: str) -> bool:
    """Every task on the driver's host: `local[...]` and `local-cluster[...]`."""
    return master.startswith("local")


def tasks_in_driver_jvm(master: str) -> bool:
    """`local`, `local[N]`, `local[N,F]`: every task in the driver's own JVM (not
    `local-cluster[...]`, whose executors are JVMs of their own)."""
    return master == "local" or master.startswith("local[")


def shared_paths(conf: dict) -> list[str]:
    raw = conf.get(SHARED_PATHS) or []
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    return [os.path.abspath(p.strip()) for p in items if str(p).strip()]


def is_shared(path: str, conf: dict) -> bool:
    """A distributed filesystem's URI, or a path under one of `squall.shared.paths`."""
    if "://" in path and not path.startswith("file:"):
        return True
    p = os.path.abspath(path.removeprefix("file://").removeprefix("file:"))
    return any(p == s or p.startswith(s.rstrip(os.sep) + os.sep) for s in shared_paths(conf))


def _held(obj: Any, depth: int, seen: set[int]) -> Iterator[tuple[str, Any]]:
    """(attribute path, object) for `obj` and what it holds, a few levels deep."""
    if id(obj) in seen or depth < 0 or isinstance(obj, (str, bytes, int, float, bool, type(None))):
        return
    seen.add(id(obj))
    yield "", obj
    if isinstance(obj, dict):
        children = [(f"[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = [(f"[{i}]", v) for i, v in enumerate(obj)]
    else:
        attrs = getattr(obj, "__dict__", None)
        children = [(f".{k}", v) for k, v in attrs.items()] if isinstance(attrs, dict) else []
    for name, child in children:
        for sub, o in _held(child, depth - 1, seen):
            yield name + sub, o


def host_local_objects(components: dict[str, Any], conf: dict, depth: int = 4) -> list[str]:
    """'component.attr (Class)' for every held object declaring HOST_LOCAL = True, not on a shared path."""
    found = []
    for cid, comp in components.items():
        for where, obj in _held(comp, depth, set()):
            if getattr(type(obj), "HOST_LOCAL", False) is True:
                path = getattr(obj, "path", None)
                if isinstance(path, str) and is_shared(path, conf):
                    continue
                found.append(f"{cid}{where} ({type(obj).__name__}{f', path {path!r}' if path else ''})")
    return found


def check_cluster_resources(master: str, conf: dict, components: dict[str, Any]) -> None:
    """Raises HostLocalResourceError listing every host-local resource when `master` is a cluster."""
    if is_local_master(master):
        return
    problems = []
    objs = host_local_objects(components, conf)
    if objs:
        problems.append("host-local state (one file or memory per host, never the same data): "
                        + "; ".join(objs) + f". Instead {ALTERNATIVES}.")
    ckpt = conf.get(CHECKPOINT_DIR)
    if not ckpt:
        problems.append(f"no {CHECKPOINT_DIR!r}: on a cluster the slots write their snapshots there, and a slot "
                        "restores another host's tasks from them; set it to a directory every host mounts (each "
                        "slot checks it sees the driver's own there when it loads the topology).")
    elif "://" in str(ckpt) and not str(ckpt).startswith("file:"):
        problems.append(f"{CHECKPOINT_DIR}={ckpt!r}: snapshots are written with the file system; use a directory "
                        "every host mounts.")
    if problems:
        raise HostLocalResourceError(f"refusing to submit to the Spark cluster {master}:\n- " + "\n- ".join(problems))
