"""A streamparse project on disk: `topologies/<name>.py` defines one Topology class and imports
its components from `src/` (`from bolts.wordcount import WordCountBolt`), which streamparse
puts on the path. `squall run` does the same here."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from squall.streamparse.topology import Topology


class ProjectError(ValueError):
    """A streamparse project that cannot be loaded as given (printed without a traceback)."""


def source_folder(topology_file: str | Path, path: str | None = None) -> Path | None:
    """`path` (--path), else `src/` beside a `topologies/` folder holding the file, else None."""
    if path is not None:
        folder = Path(path).resolve()
        if not folder.is_dir():
            raise ProjectError(f"--path {path}: no such folder (it should hold the project's spouts/ and bolts/)")
        return folder
    parent = Path(topology_file).resolve().parent
    src = parent.parent / "src"
    return src if parent.name == "topologies" and src.is_dir() else None


def add_to_path(folder: Path | None) -> None:
    if folder is not None and str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


def topology_class(module: ModuleType) -> type[Topology] | None:
    """The one streamparse Topology class the file defines (None if it defines none)."""
    found = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Topology)
             and v is not Topology and v.__module__ == module.__name__]
    if len(found) > 1:
        names = ", ".join(sorted(c.__name__ for c in found))
        raise ProjectError(f"{module.__file__} defines several Topology classes ({names}); keep one per file, as "
                           "streamparse does")
    return found[0] if found else None


def ship_by_value(folder: Path | None) -> None:
    """The project's modules are not importable on Spark's Python workers: pickle them by value."""
    if folder is None:
        return
    try:
        from pyspark import cloudpickle  # noqa: PLC0415
    except ImportError:
        return
    root = folder.resolve()
    for mod in list(sys.modules.values()):
        file: Any = getattr(mod, "__file__", None)
        if file and Path(file).resolve().is_relative_to(root):
            try:
                cloudpickle.register_pickle_by_value(mod)
            except ValueError:
                pass
