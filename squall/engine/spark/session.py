"""Starting (or reusing) the SparkSession squall runs on."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from squall.api.config import Config
from squall.engine.spark.host_local import check_cluster_resources, is_local_master, tasks_in_driver_jvm
from squall.engine.spark.logs import (
    CONSOLE_LEVEL,
    FILE_LEVEL,
    can_log_to_file,
    spark_log_path,
    start_context_logging_to_file,
)

log = logging.getLogger("squall")

DEFAULT_MASTER = "local[*,4]"  # all cores; up to 4 attempts per task, so a dead Python worker is retried
# On one host the JVM only schedules and moves bytes, and its optimizing JIT (C2) keeps compiling
# for more than a minute, taking CPU from the Python workers; C1 alone leaves them the cores.
# SQUALL_SPARK_JAVA_OPTIONS replaces it ("" for none).
LOCAL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


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


def _settings(master: str | None, app_name: str, ui: bool, extra_conf: dict[str, str] | None) -> dict[str, str]:
    settings = {
        "spark.master": master or DEFAULT_MASTER,
        "spark.app.name": app_name,
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.locality.wait": "0",
        "spark.python.worker.reuse": "true",
        # Executors talk to their Python workers over Unix sockets, not loopback TCP: TCP's
        # delayed ACKs would hold each task's small command and input frames.
        "spark.python.unix.domain.socket.enabled": "true",
        # A level's shuffle written by Spark's sort writer (one file a task), not its bypass writer
        # (a file per reduce partition, then joined): less of the JVM's CPU a wave.
        "spark.shuffle.sort.bypassMergeThreshold": "0",
        "spark.driver.memory": os.environ.get("SQUALL_SPARK_DRIVER_MEMORY", "2g"),
        "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
        "spark.executorEnv.PYSPARK_PYTHON": os.environ["PYSPARK_PYTHON"],
    }
    java_options = os.environ.get("SQUALL_SPARK_JAVA_OPTIONS",
                                  LOCAL_JAVA_OPTIONS if tasks_in_driver_jvm(settings["spark.master"]) else "")
    if java_options:  # the driver's JVM, which on a local master runs the tasks too
        settings["spark.driver.extraJavaOptions"] = java_options
    settings.update(extra_conf or {})
    return settings


def get_or_create_session(master: str | None = None, app_name: str = "squall", ui: bool = False,
                          extra_conf: dict[str, str] | None = None, log_level: str | None = None) -> Any:
    """The SparkSession to run on. Spark's own logs go to a file (squall.engine.spark.logs)
    unless `log_level` (or SQUALL_SPARK_LOG_LEVEL) asks for them on the console at that level."""
    check_java()
    _worker_env()
    from pyspark.sql import SparkSession  # noqa: PLC0415 - only the Spark engine needs pyspark

    settings = _settings(master, app_name, ui, extra_conf)
    level = log_level or os.environ.get("SQUALL_SPARK_LOG_LEVEL") or None
    if level is None and can_log_to_file():
        start_context_logging_to_file(settings, app_name)  # the builder below finds this context
    builder = SparkSession.builder
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    sc = spark.sparkContext
    sc.setLogLevel(level or (FILE_LEVEL if spark_log_path() else CONSOLE_LEVEL))
    if not sc.getCheckpointDir() and is_local_master(sc.master):
        # One host: a temp dir will do. On a cluster the topology's squall.checkpoint.dir (shared) is
        # set at submit (squall.engine.spark.host_local refuses a cluster submit without it).
        sc.setCheckpointDir(temp_checkpoint_dir())
    return spark


def topology_session(spark: Any, conf: dict, topology: Any) -> Any:
    """The session a topology's bolts run in, for either way of running them: squall's own when
    `spark` is None or a master URL (the topology's UI and log level settings), else `spark`.
    Components that run on the executors and hold host-local resources are refused on a cluster;
    driver-bound spouts (and Trident's batch metadata they keep) run on the driver, one host."""
    if spark is None or isinstance(spark, str):
        spark = get_or_create_session(spark, ui=bool(conf.get(Config.SQUALL_SPARK_UI)),
                                      log_level=conf.get(Config.SQUALL_SPARK_LOG_LEVEL))
    check_cluster_resources(spark.sparkContext.master, conf,
                            {c: spec.obj for c, spec in topology.specs.items()
                             if not (spec.is_spout and getattr(type(spec.obj), "DRIVER_BOUND", False))})
    return spark


def ui_url(sc: Any) -> str | None:
    """The Spark UI's address, or None (no UI, or a context that cannot say)."""
    try:
        return sc.uiWebUrl
    except Exception:  # noqa: BLE001
        return None


def temp_checkpoint_dir() -> str:
    """A temp dir for Spark's checkpoints on one host, removed when this process exits, so no
    run leaves its checkpointed task state in /tmp."""
    path = tempfile.mkdtemp(prefix="squall-checkpoints-")
    atexit.register(shutil.rmtree, path, True)
    return path
