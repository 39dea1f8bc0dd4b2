"""Where Spark's own output goes: a log file, not the user's console, unless asked for.

Spark writes to the console of the process that started its JVM: log4j's lines (a failed
task's Java stack trace, `TaskSetManager` and `Executor` errors), the JVM's own warnings, and
whatever its Python workers write to stderr (the JVM copies their output to its stderr). A
lost wave repeats all of that for every attempt of every task, burying what matters. squall
says what matters itself (one line per lost wave, naming the Python error), so by default the
JVM squall starts writes its stdout and stderr to a file, and that line gives the file's path.
A log level (conf `squall.spark.log.level`, `squall run --spark-log-level`, or the environment
variable SQUALL_SPARK_LOG_LEVEL) keeps Spark's output on the console, at that level.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from typing import Any

FILE_LEVEL = "WARN"  # what the file keeps: failed tasks with their traces, not every task's start and end
CONSOLE_LEVEL = "ERROR"  # a JVM squall did not start writes to the console: keep it to errors

_log_path: str | None = None  # the file the JVM squall started writes to, while it runs


def spark_log_path() -> str | None:
    """The file Spark's own logs go to, or None when they go to the console."""
    return _log_path


def spark_log_note() -> str:
    """What a line about a Spark failure adds, so the full trace can be found."""
    return f"; full Spark log: {_log_path}" if _log_path else ""


def can_log_to_file() -> bool:
    """Only a JVM squall launches itself can have its output sent to a file: not one a
    SparkContext already runs on, nor one spark-submit started (PYSPARK_GATEWAY_PORT)."""
    from pyspark import SparkContext  # noqa: PLC0415 - only the Spark engine needs pyspark

    return SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ


KEEP_LOGS = 30  # the newest log files kept in squall-logs; older ones go when a new one starts
KEEP_LOG_DAYS = 7.0  # and none older than this


def new_log_path(app_name: str) -> str:
    """A fresh file under the temp dir: squall-logs/spark-<app>-<time>-<pid>.log. Old files
    there are removed first, so a machine that runs squall daily does not fill its temp dir."""
    folder = os.path.join(tempfile.gettempdir(), "squall-logs")
    os.makedirs(folder, exist_ok=True)
    prune_logs(folder)
    app = re.sub(r"[^\w.-]+", "_", app_name)[:60]
    return os.path.join(folder, f"spark-{app}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")


def prune_logs(folder: str, keep: int = KEEP_LOGS, max_age_days: float = KEEP_LOG_DAYS,
               now: float | None = None) -> list[str]:
    """Removes squall's Spark logs in ``folder`` beyond the newest ``keep`` or older than
    ``max_age_days``; returns the paths removed. A file another run still writes to is at
    worst unlinked (its writer keeps its descriptor), never truncated."""
    now = time.time() if now is None else now
    logs = []
    for entry in os.scandir(folder):
        if entry.is_file() and entry.name.startswith("spark-") and entry.name.endswith(".log"):
            try:
                logs.append((entry.stat().st_mtime, entry.path))
            except FileNotFoundError:  # removed meanwhile by another run
                continue
    logs.sort(reverse=True)
    old = [p for i, (mtime, p) in enumerate(logs) if i >= keep or now - mtime > max_age_days * 86400]
    removed = []
    for p in old:
        try:
            os.remove(p)
            removed.append(p)
        except FileNotFoundError:
            pass
    return removed


def start_context_logging_to_file(settings: dict[str, str], app_name: str) -> Any:
    """Launch Spark's JVM with its stdout and stderr on a new log file and start the
    SparkContext on it (SparkSession.builder.getOrCreate then uses that context)."""
    global _log_path
    from pyspark import SparkConf, SparkContext  # noqa: PLC0415
    from pyspark.java_gateway import launch_gateway  # noqa: PLC0415

    conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
    path = new_log_path(app_name)
    with open(path, "ab") as out:  # the JVM keeps its own descriptor; ours closes
        gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})
    sc = SparkContext(conf=conf, gateway=gateway)
    _log_path = path
    return sc
