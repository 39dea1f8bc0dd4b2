"""A clean Python for the cluster's workers: the third-party packages squall needs, and NOT squall
nor the user's code (the filesystem is shared with the driver, so only the interpreter can make a
worker host "without squall"). squall and the topology reach the workers as `--py-files`.

Built once per dependency set under ~/.cache/squall/ (pip, about 20 s), reused afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

# What a cluster host has installed (its "image"): squall's runtime dependencies without pyspark
# (the Spark worker puts its own pyspark.zip on the Python workers' path), plus the drivers of
# the connectors a topology uses on executors.
PACKAGES = ["numpy>=1.26", "rich>=13", "pandas<3", "pyarrow>=15", "psycopg[binary]>=3.1", "pika>=1.3"]


def worker_python() -> str:
    """The clean venv's python, built if missing; fails with pip's output if it cannot be built."""
    key = zlib.crc32(" ".join([sys.version, *PACKAGES]).encode())
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "squall" / f"worker-venv-{key:08x}"
    python = root / "bin" / "python"
    if (root / ".complete").exists():
        return str(python)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True, capture_output=True)
    r = subprocess.run([str(python), "-m", "pip", "install", "-q", *PACKAGES], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"could not build the clean worker venv {root}:\n{r.stdout}\n{r.stderr}")
    (root / ".complete").touch()
    return str(python)
