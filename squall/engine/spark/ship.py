"""Shipping code to the executors: squall as one zip for `--py-files` / `SparkContext.addPyFile`,
and the user's own modules of a topology's components pickled by value.

squall is pure Python, so a zip of the package is all a worker needs besides its third-party
dependencies (numpy, pyarrow, ...: binary wheels, installed on each host or shipped as a packed venv).
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

from squall.engine.spark.host_local import is_local_master


def squall_zip(dest_dir: str | None = None) -> str:
    """A zip of the importable squall package (no caches); its path."""
    pkg = Path(__file__).resolve().parents[2]  # squall/engine/spark/ship.py -> squall/
    out = Path(dest_dir or tempfile.mkdtemp(prefix="squall-ship-")) / "squall.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for dirpath, dirnames, filenames in os.walk(pkg):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames:
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = Path(dirpath) / name
                z.write(path, path.relative_to(pkg.parent).as_posix())
    return str(out)


def ship_squall(sc: Any) -> None:
    """squall's own zip to a cluster's executors, once per context (what `--py-files` does by
    hand), so their Python needs only squall's dependencies; a zip already added is left alone."""
    if is_local_master(sc.master) or "squall.zip" in (sc._python_includes or []):
        return
    sc.addPyFile(squall_zip())


def _installed_dirs() -> list[str]:
    """Where installed code lives (the standard library, site-packages): the executors' Python
    has its own copy of such modules, so they go by reference."""
    dirs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.update(site.getsitepackages() + [site.getusersitepackages()])
    return sorted({os.path.realpath(d) + os.sep for d in dirs if d})


def _under(path: str, dirs: list[str]) -> bool:
    return any(path.startswith(d) for d in dirs)


def user_modules(objs: list[Any], reachable: list[str]) -> list[ModuleType]:
    """The modules the components `objs` come from (their classes, every base class, and the user
    modules those import), that are neither installed nor under a `reachable` directory (on the
    executors' PYTHONPATH): the executors cannot import them by name."""
    installed = _installed_dirs()
    skip = [os.path.realpath(d) + os.sep for d in reachable if d and os.path.isdir(d)]

    def user(m: Any) -> bool:
        f = getattr(m, "__file__", None)
        if not isinstance(m, ModuleType) or not f or m.__name__.split(".")[0] in _OURS or m.__name__ == "__main__":
            return False
        path = os.path.realpath(f)
        return not _under(path, installed) and not _under(path, skip)

    todo = [sys.modules.get(c.__module__) for obj in objs for c in type(obj).__mro__]
    seen: dict[str, ModuleType] = {}
    while todo:
        m = todo.pop()
        if m is None or m.__name__ in seen or not user(m):
            continue
        seen[m.__name__] = m
        for v in list(vars(m).values()):  # what it imported: a module, or a class or function of one
            todo.append(v if isinstance(v, ModuleType) else sys.modules.get(getattr(v, "__module__", None) or ""))
    return [seen[k] for k in sorted(seen)]


_OURS = frozenset({"squall", "pyspark", "py4j", "cloudpickle"})


def pickle_user_modules_by_value(sc: Any, objs: list[Any]) -> list[str]:
    """Register the user's modules of `objs` with cloudpickle by value, so a topology from the
    caller's own modules loads on executors that cannot import them (a user's own SparkSession,
    a script run from another directory, a cluster); the names registered."""
    from pyspark import cloudpickle  # noqa: PLC0415

    reachable = (sc.getConf().get("spark.executorEnv.PYTHONPATH", "") or "").split(os.pathsep)
    if is_local_master(sc.master):  # local executors' workers also inherit the driver's PYTHONPATH
        reachable += os.environ.get("PYTHONPATH", "").split(os.pathsep)
    else:
        reachable = []  # paths on the driver's disk say nothing of the executors' hosts
    names = []
    for m in user_modules(objs, reachable):
        try:
            cloudpickle.register_pickle_by_value(m)
            names.append(m.__name__)
        except ValueError:  # not in sys.modules under its name: cloudpickle pickles it by value anyway
            pass
    return names
