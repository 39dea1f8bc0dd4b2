"""The `squall` command.

    squall run PATH [--engine local|spark] [--seconds N] [--name NAME] [--spark MASTER]
               [--spark-ui] [--spark-log-level LEVEL] [--ui [PORT]] [--ui-host HOST] [-v]

`PATH` is a Python file defining `build_topology()` (and optionally `CONF`, a Config dict;
`done(cluster, name)`, to stop once it returns True; `report()`, printed at the end), or a
streamparse project's `topologies/<name>.py` defining a `Topology` class (its components are
imported from `--path` or from `src/` beside `topologies/`).
The topology runs on a LocalCluster in real time with a live progress line, for `--seconds`
(0: until Ctrl-C), then it is killed and a per-component summary is printed.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.logging import RichHandler
from rich.markup import escape
from rich.table import Table

from squall.api.config import Config
from squall.observe.progress import ProgressLine

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
REFRESH_PER_SEC = 4
ERRORS_SHOWN = 5
LOG_EVERY_SECS = 5
PIPE_WIDTH = 160
SPARK_MODULES = ("squall.engine.spark", "pyspark", "py4j")


class UsageError(Exception):
    """A problem with what the user asked for: printed without a traceback, exit code 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="squall", description="Run squall topologies.")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the topology that a Python file builds",
                         description="Import PATH, call its build_topology(), run it with a live progress line.")
    run.add_argument("path", metavar="PATH", help="a Python file defining build_topology() (and optionally CONF)")
    run.add_argument("--path", dest="path_src", metavar="SRC", default=None,
                     help="a streamparse project's source folder (default: src/ beside topologies/)")
    run.add_argument("--engine", choices=("local", "spark"), default="spark", help="execution engine (default: spark)")
    run.add_argument("--seconds", type=float, default=10.0, help="how long to run (default 10; 0 = until Ctrl-C)")
    run.add_argument("--name", default=None, help="topology name (default: the file's name)")
    run.add_argument("--spark", metavar="MASTER", default=None,
                     help='Spark master URL for --engine spark (default "local[*]")')
    run.add_argument("--spark-ui", action="store_true", help="enable the Spark web UI (its address is printed)")
    run.add_argument("--spark-log-level", metavar="LEVEL", default=None,
                     help="show Spark's own logs on the console at this log4j level (WARN, INFO, ...); by "
                          "default they go to a file whose path is printed")
    run.add_argument("--ui", metavar="PORT", nargs="?", type=int, const=8080, default=None,
                     help="serve squall's web page, REST API and /metrics on PORT (default 8080; 0: any free port)")
    run.add_argument("--ui-host", metavar="HOST", default="127.0.0.1",
                     help="the address the UI listens on (default 127.0.0.1: this machine only)")
    run.add_argument("-v", "--verbose", action="store_true",
                     help="log every error as it happens (by default errors are counted live and the last few "
                          "are shown at the end)")
    return p


def load_topology_module(path: str, src: str | None = None) -> ModuleType:
    """Import the file at `path` as a module; UsageError if it is missing or defines neither
    build_topology() nor a streamparse Topology class (whose project source folder, `src`
    or src/ beside topologies/, goes on sys.path first)."""
    from squall.streamparse import project  # noqa: PLC0415

    file = Path(path)
    if not file.exists():
        raise UsageError(f"no such file: {path}")
    if not file.is_file():
        raise UsageError(f"not a file: {path}")
    name = f"squall_user_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file.resolve())
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path}: not a Python file?")
    module = importlib.util.module_from_spec(spec)
    # Registered so dataclasses, pickle by reference and the like work; siblings importable.
    sys.modules[name] = module
    folder = str(file.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module.squall_src = project.source_folder(file, src)
        project.add_to_path(module.squall_src)
        spec.loader.exec_module(module)
        sp_topology = project.topology_class(module)
    except project.ProjectError as e:
        del sys.modules[name]
        raise UsageError(str(e)) from None
    except Exception:
        del sys.modules[name]
        raise
    if sp_topology is not None and not callable(getattr(module, "build_topology", None)):
        module.build_topology = lambda: sp_topology  # submit_topology builds it, with its class config
        if getattr(module, "CONF", None) is None:
            module.CONF = sp_topology.build_conf()  # so the CLI sees it too (squall.spark.ui, ...)
    if not callable(getattr(module, "build_topology", None)):
        raise UsageError(f"{path} defines no build_topology() function; it must return a StormTopology "
                         "(e.g. TopologyBuilder().create_topology()), or define a streamparse Topology class")
    return module


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if v < 10 else f"{v:.1f}"
    return str(v)


def summary_table(name: str, stats: dict[str, dict[str, Any]], seconds: float) -> Table:
    title = escape(f"topology {name!r} after {seconds:.1f}s")
    t = Table(title=title, title_justify="left")
    for col in ("component", "kind", "tasks", "emitted", "executed", "acked", "failed", "errors"):
        t.add_column(col, justify="left" if col in ("component", "kind") else "right")
    t.add_column("latency ms", justify="right")
    t.add_column("p50 / p99 ms", justify="right")
    for comp in sorted(stats, key=lambda c: (stats[c].get("kind") != "spout", c)):
        s = stats[comp]
        spout = s.get("kind") == "spout"
        lat = s.get("complete_latency_ms") if spout else s.get("execute_latency_ms")
        pct = f"{_fmt(s.get('complete_latency_p50_ms'))} / {_fmt(s.get('complete_latency_p99_ms'))}" if spout else ""
        t.add_row(comp, s.get("kind", "?"), str(s.get("tasks", "")), str(s.get("emitted", 0)),
                  "" if spout else str(s.get("executed", 0)), str(s.get("acked", 0)), str(s.get("failed", 0)),
                  str(s.get("errors", 0)), _fmt(lat), pct)
    return t


def run_command(args: argparse.Namespace, console: Console) -> int:
    from squall.engine.cluster import LocalCluster  # noqa: PLC0415 - keep `squall --help` fast

    if args.seconds < 0:
        raise UsageError(f"--seconds must be >= 0, got {args.seconds:g}")
    module = load_topology_module(args.path, args.path_src)
    name = args.name or Path(args.path).stem
    topology = module.build_topology()
    conf = dict(getattr(module, "CONF", None) or {})
    if args.spark_ui:
        conf["squall.spark.ui"] = True
    if args.spark is not None and args.engine != "spark":
        console.print(f"[yellow]note:[/] --spark {escape(args.spark)} is ignored with --engine {args.engine}")
    if args.engine == "spark":
        _ship_by_value(module)
        from squall.streamparse.project import ship_by_value  # noqa: PLC0415

        ship_by_value(module.squall_src)

    _setup_logging(console, args.verbose)
    try:
        spark = _spark_session(args, conf, name) if args.engine == "spark" else None
        cluster = _cluster(LocalCluster, args, spark)
        cluster.submit_topology(name, conf, topology)
    except ImportError as e:
        if args.engine != "spark" or not (e.name or "").startswith(SPARK_MODULES):
            raise
        console.print(f"[bold red]error:[/] cannot start the spark engine: {escape(str(e))} "
                      "(--engine local runs without Spark)")
        return EXIT_FAILED
    coord = cluster.coordinator(name)
    if cluster.ui_url is not None:
        console.print(f"squall UI: {cluster.ui_url}")
    if args.engine == "spark":
        ui = getattr(coord.executor, "ui_url", None)
        if ui is not None:
            console.print(f"Spark UI: {ui}")
    spark_log = _spark_log_path() if args.engine == "spark" else None
    if spark_log is not None:
        console.print(f"Spark's own logs go to {escape(spark_log)} (--spark-log-level WARN shows them here)")
    how_long = "until Ctrl-C" if args.seconds == 0 else f"for {args.seconds:g}s"
    console.print(f"running topology [bold]{escape(name)}[/] on the {args.engine} engine {how_long}")

    done = getattr(module, "done", None)  # optional: stop early once it returns True
    code, crash, elapsed = _watch(args, cluster, name, done, console)
    cluster.shutdown()  # stops the UI
    if elapsed < 0:
        return EXIT_INTERRUPTED
    _print_summary(console, name, coord, elapsed, getattr(module, "report", None))
    if coord.lost_waves and spark_log is not None:
        console.print(f"{coord.lost_waves} wave(s) lost; Spark's full traces are in {escape(spark_log)}")
    if crash is not None:
        console.print(f"[bold red]the topology stopped with an error:[/] {escape(f'{type(crash).__name__}: {crash}')}")
        return EXIT_FAILED
    return code


def _watch(args: argparse.Namespace, cluster: Any, name: str, done: Any,
           console: Console) -> tuple[int, BaseException | None, float]:
    """Show progress until the time is up, the module's `done(cluster, name)` says so, the
    topology crashes or Ctrl-C; then stop it. Returns (exit code, crash, seconds run; -1 when
    a second Ctrl-C cut the stop short)."""
    progress = ProgressLine(cluster, name)
    t0 = time.monotonic()
    code = EXIT_OK
    crash = None
    try:
        try:
            with _Display(console, progress) as display:
                try:
                    while args.seconds == 0 or time.monotonic() - t0 < args.seconds:
                        time.sleep(1 / REFRESH_PER_SEC)
                        try:
                            if name not in cluster.topology_names():
                                raise KeyError(name)
                            display.refresh()
                            crash = cluster.get_crash(name)
                        except KeyError:  # killed from the UI, maybe between the check and the reads
                            console.print("the topology was killed from the UI")
                            break
                        if crash is not None:
                            break
                        if done is not None and done(cluster, name):
                            display.refresh(final=True)
                            console.print("the topology finished its input")
                            break
                except KeyboardInterrupt:
                    code = EXIT_OK if args.seconds == 0 else EXIT_INTERRUPTED
                    display.refresh(final=True)
                    console.print("[yellow]interrupted[/]: stopping the topology")
        finally:
            elapsed = time.monotonic() - t0
            if name in cluster.topology_names():
                cluster.kill_topology(name)
    except KeyboardInterrupt:  # a second Ctrl-C while stopping
        console.print("[red]interrupted again; exiting without a summary[/]")
        return EXIT_INTERRUPTED, None, -1.0
    return code, crash, elapsed


def _cluster(local_cluster: Any, args: argparse.Namespace, spark: Any) -> Any:
    """The LocalCluster, serving the UI when --ui asks for it."""
    if args.ui is None:
        return local_cluster(engine=args.engine, spark=spark)
    try:
        return local_cluster(engine=args.engine, spark=spark, ui_port=args.ui, ui_host=args.ui_host)
    except OSError as e:
        raise UsageError(str(e)) from e
    except ImportError as e:
        if "squall[ui]" in str(e):
            raise UsageError(str(e)) from e
        raise


def _print_summary(console: Console, name: str, coord: Any, elapsed: float, report: Any) -> None:
    console.print(summary_table(name, coord.stats_dict(), elapsed))
    if report is not None:  # optional: what the topology computed
        console.print(report())
    errors = list(coord.errors)
    if coord.error_count:
        console.print(f"[bold red]{coord.error_count} error(s)[/]; the last {min(len(errors), ERRORS_SHOWN)}:")
        for e in errors[-ERRORS_SHOWN:]:
            console.print(f"  [red]{escape(str(e))}[/]", highlight=False)


class _Display:
    """On a terminal, a rich Live line refreshed in place; otherwise (a pipe, a log file) a
    plain line every LOG_EVERY_SECS and a last one at the end."""

    def __init__(self, console: Console, progress: ProgressLine):
        self.console = console
        self.progress = progress
        self.live: Live | None = None
        self.last_logged = time.monotonic()

    def __enter__(self) -> _Display:
        if self.console.is_terminal:
            self.live = Live(self.progress.render(), console=self.console, auto_refresh=False)
            self.live.__enter__()
        else:
            self.progress.update()
        return self

    def refresh(self, final: bool = False) -> None:
        if self.live is not None:
            self.live.update(self.progress.render(), refresh=True)
            return
        self.progress.update()
        now = time.monotonic()
        if final or now - self.last_logged >= LOG_EVERY_SECS:
            self.last_logged = now
            self.console.print(self.progress.line(), soft_wrap=True)

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)
        elif exc[0] is None:
            self.refresh(final=True)


def _setup_logging(console: Console, verbose: bool) -> None:
    """Unless logging is configured already, send squall's log through the rich console (so it
    prints above the live line), errors only unless verbose: every error of user code is
    logged as a warning, which would flood the screen; they are counted live instead."""
    log = logging.getLogger("squall")
    if log.handlers or logging.getLogger().handlers:
        return
    handler = RichHandler(console=console, show_path=False, show_time=False, markup=False)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.WARNING if verbose else logging.ERROR)
    log.propagate = False


def _spark_session(args: argparse.Namespace, conf: dict, name: str) -> Any:
    """Started here, so Spark's own logs follow --spark-log-level (else the topology's
    squall.spark.log.level): by default they go to a file, not over the progress line."""
    from squall.engine.spark.session import get_or_create_session  # noqa: PLC0415 - pyspark is heavy

    return get_or_create_session(args.spark, app_name=f"squall-{name}", ui=bool(conf.get(Config.SQUALL_SPARK_UI)),
                                 log_level=spark_log_level(args, conf))


def spark_log_level(args: argparse.Namespace, conf: dict) -> str | None:
    """--spark-log-level, else the topology's squall.spark.log.level; None: Spark logs to a file."""
    return args.spark_log_level or conf.get(Config.SQUALL_SPARK_LOG_LEVEL) or None


def _spark_log_path() -> str | None:
    from squall.engine.spark.logs import spark_log_path  # noqa: PLC0415

    return spark_log_path()


def _ship_by_value(module: ModuleType) -> None:
    """The user's file is not importable on Spark's Python workers: pickle its code by value."""
    try:
        from pyspark import cloudpickle  # noqa: PLC0415
    except ImportError:
        return
    register = getattr(cloudpickle, "register_pickle_by_value", None)
    if register is not None:
        try:
            register(module)
        except ValueError:
            pass


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=PIPE_WIDTH)
    err = Console(stderr=True, highlight=False)
    try:
        if args.command == "run":
            return run_command(args, console)
    except UsageError as e:
        err.print(f"[bold red]squall {args.command}:[/] {escape(str(e))}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.print("[red]interrupted[/]")
        return EXIT_INTERRUPTED
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
