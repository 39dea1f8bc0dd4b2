"""Shipping squall to a cluster's Python workers as one zip for `--py-files` / `SparkContext.addPyFile`.

squall is pure Python, so a zip of the package is all a worker needs besides its third-party
dependencies (numpy, pyarrow, ...: binary wheels, installed on each host or shipped as a packed venv).
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import squall


def squall_zip(dest_dir: str | None = None) -> str:
    """A zip of the importable squall package (no caches); its path."""
    pkg = Path(squall.__file__).resolve().parent
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
