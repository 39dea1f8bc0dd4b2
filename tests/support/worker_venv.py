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
PACKAGES = ["numpy>=1.26", "rich>=13", "pandas<3", "pyarrow>=15", "psycopg[binary]>=3.1", "pika>=1.3", "redis>=5"]


# The modules a worker must import: checked in the venv before it counts as built, and again on use.
IMPORTS = "import numpy, rich, pandas, pyarrow, psycopg, pika, redis"


def _clean_env() -> dict[str, str]:
    """This process's environment without what points into the driver's venv: a SparkSession
    sets PYTHONPATH to the driver's whole sys.path, and pip run under it finds every package
    "already satisfied" there and installs nothing into the clean venv."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONUSERBASE", "PIP_TARGET", "PIP_PREFIX"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def _imports_ok(python: Path) -> bool:
    return subprocess.run([str(python), "-c", IMPORTS], env=_clean_env(), capture_output=True).returncode == 0


def worker_python() -> str:
    """The clean venv's python, built if missing (or if it cannot import what a worker needs);
    fails with pip's output if it cannot be built."""
    key = zlib.crc32(" ".join([sys.version, *PACKAGES]).encode())
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "squall" / f"worker-venv-{key:08x}"
    python = root / "bin" / "python"
    if (root / ".complete").exists() and _imports_ok(python):
        return str(python)
    env = _clean_env()
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True, capture_output=True, env=env)
    r = subprocess.run([str(python), "-m", "pip", "install", "-q", *PACKAGES], capture_output=True, text=True,
                       env=env)
    if r.returncode != 0 or not _imports_ok(python):
        raise RuntimeError(f"could not build the clean worker venv {root}:\n{r.stdout}\n{r.stderr}")
    (root / ".complete").touch()
    return str(python)
