"""Starting (or reusing) the SparkSession squall runs on."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

log = logging.getLogger("squall")

DEFAULT_MASTER = "local[*,4]"  # all cores; up to 4 attempts per task, so a dead Python worker is retried


class JavaMissingError(RuntimeError):
    pass


def check_java() -> str:
    """Spark needs Java 17 or newer on PATH (or JAVA_HOME); say so clearly if it is missing."""
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    if not java or not os.path.exists(java):
        raise JavaMissingError(
            "the Spark engine needs Java 17+ (no `java` on PATH and no JAVA_HOME). Install it "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or use engine='local'."
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    return out.splitlines()[0] if out else java


def _worker_env() -> None:
    # Executors' Python workers must run this interpreter and import what the driver imports
    # (squall, and the user's modules next to their script).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    cwd = os.getcwd()
    if cwd not in paths:
        paths.insert(0, cwd)
    existing = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths + ([existing] if existing else [])))


def get_or_create_session(master: str | None = None, app_name: str = "squall", ui: bool = False,
                          extra_conf: dict[str, str] | None = None) -> Any:
    check_java()
    _worker_env()
    from pyspark.sql import SparkSession  # noqa: PLC0415 - only the Spark engine needs pyspark

    builder = (SparkSession.builder.master(master or DEFAULT_MASTER).appName(app_name)
               .config("spark.ui.enabled", "true" if ui else "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.locality.wait", "0")
               .config("spark.python.worker.reuse", "true")
               .config("spark.driver.memory", os.environ.get("SQUALL_SPARK_DRIVER_MEMORY", "2g"))
               .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
               .config("spark.executorEnv.PYSPARK_PYTHON", os.environ["PYSPARK_PYTHON"]))
    for k, v in (extra_conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    sc = spark.sparkContext
    sc.setLogLevel(os.environ.get("SQUALL_SPARK_LOG_LEVEL", "ERROR"))
    if not sc.getCheckpointDir():
        sc.setCheckpointDir(tempfile.mkdtemp(prefix="squall-checkpoints-"))
    return spark
