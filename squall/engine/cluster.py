"""LocalCluster: runs topologies in this process (local engine) or on Spark, in real or simulated time."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from squall.api.config import Config, effective_conf
from squall.api.topology import StormTopology
from squall.engine.driver.clock import RealClock, SimulatedClock
from squall.engine.driver.component_copy import check_components_copy
from squall.engine.driver.coordinator import Coordinator
from squall.engine.local import LocalExecutor
from squall.observe.errors import ErrorRecord

log = logging.getLogger("squall")

ENGINES = ("spark", "local")
IDLE_SLEEP_MAX = 0.005
SIMULATED_IDLE_SLEEP_MAX = 0.02  # an idle simulated-time topology waits for a test's input: looked at less often


def make_coordinator(engine: str, name: str, topology: StormTopology, conf: dict, clock: Any, spark: Any = None,
                     capture: bool = False) -> Any:
    """The driver of a topology on `engine`: the local engine's coordinator (every task in this
    process), or the Spark engine's (every task in a slot on the executors)."""
    if engine == "local":
        return Coordinator(name, topology, conf, LocalExecutor(topology, conf, capture), clock, capture=capture)
    if engine == "spark":
        from squall.engine.spark.slots import cluster_driver  # noqa: PLC0415 - pyspark is heavy

        return cluster_driver(name, topology, conf, clock, spark, capture)
    raise ValueError(f"unknown engine {engine!r}: use one of {ENGINES}")


class _Running:
    """One submitted topology: its coordinator and, unless stepped, the thread driving its waves."""

    def __init__(self, coord: Coordinator, idle_sleep_max: float = IDLE_SLEEP_MAX):
        self.coord = coord
        self.idle_sleep_max = idle_sleep_max
        self.started = time.time()
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()
        self.idle_wave = 0  # the last wave that made no progress
        self.crash: BaseException | None = None
        self.cond = threading.Condition()
        self.step = threading.Lock()  # held by the loop for a wave, by advance_time for all of its steps

    def loop(self) -> None:
        sleep = 0.0
        try:
            while not self.stop.is_set():
                with self.step:
                    summary = self.coord.run_wave()
                if summary.progressed:
                    sleep = 0.0
                    continue
                with self.cond:
                    self.idle_wave = summary.wave
                    self.cond.notify_all()
                sleep = min(self.idle_sleep_max, sleep + 0.0005)
                self.stop.wait(sleep)
        except BaseException as e:  # noqa: BLE001 - surfaced by wait_idle / kill_topology
            log.exception("topology %s stopped: %s", self.coord.name, e)
            with self.cond:
                self.crash = e
                self.cond.notify_all()


class LocalCluster:
    """Runs topologies in this process. `engine`: "spark" (default) or "local".

    `spark`: a SparkSession or a master URL (default "local[*]") for the Spark engine.
    With `simulated_time=True` the clock moves only through `advance_time(secs)`; as in Storm's
    simulated-time cluster, only the clock is simulated: the topology keeps running (a DRPC request
    or a fed tuple is processed without the caller advancing time), while timeouts and ticks follow
    the simulated clock. `stepped=True` runs waves only inside `advance_time`/`wait_idle` instead
    (deterministic stepping, as `complete_topology` uses).
    `ui_port`: serve the web page, REST API and /metrics (squall.ui) on that port (0: any free
    one; `cluster.ui_url` tells), bound to `ui_host` (127.0.0.1: this machine only).
    """

    def __init__(self, engine: str = "spark", spark: Any = None, simulated_time: bool = False, capture: bool = False,
                 ui_port: int | None = None, ui_host: str = "127.0.0.1", stepped: bool = False):
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}: use one of {ENGINES}")
        if stepped and not simulated_time:
            raise ValueError("stepped=True needs simulated_time=True: in real time the topology always runs")
        self.engine = engine
        self.spark = spark
        self.simulated_time = simulated_time
        self.stepped = stepped
        self.clock = SimulatedClock() if simulated_time else RealClock()
        self.capture = capture
        self._topologies: dict[str, _Running] = {}
        self.ui = None
        if ui_port is not None:
            from squall.ui.server import UIServer  # noqa: PLC0415 - the ui extra, only when asked for

            self.ui = UIServer(self, ui_port, ui_host).start()

    @property
    def ui_url(self) -> str | None:
        """The UI's address (http://127.0.0.1:PORT/), or None without ui_port."""
        return self.ui.url if self.ui is not None else None

    # -- context manager --------------------------------------------------------------------

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        for name in list(self._topologies):
            self.kill_topology(name)
        if self.ui is not None:
            self.ui.stop()
            self.ui = None

    # -- topologies ---------------------------------------------------------------------------

    def submit_topology(self, name: str, conf: dict | None, topology: StormTopology) -> None:
        if name in self._topologies:
            raise ValueError(f"a topology named {name!r} is already running; kill it first or pick another name")
        if not isinstance(topology, StormTopology):
            build = getattr(topology, "build", None)
            if build is None:
                raise TypeError(
                    f"submit_topology needs a topology from create_topology(), got {type(topology).__name__}")
            build_conf = getattr(topology, "build_conf", None)  # its own defaults (a streamparse Topology's config)
            conf = {**(build_conf() if build_conf is not None else {}), **(conf or {})}
            topology = build()
        conf = effective_conf(conf)  # resolved once: spouts, bolts and the executor see the same conf
        conf[Config.TOPOLOGY_NAME] = name  # as Storm: tasks know their topology's name (state namespaces)
        for spec in topology.specs.values():  # components that cannot run on this engine say so now
            check = getattr(spec.obj, "check_engine", None)
            if check is not None:
                check(self.engine, conf)
        check_components_copy(topology, self.engine)  # a lock made in __init__ is refused here, by name
        coord = make_coordinator(self.engine, name, topology, conf, self.clock, self.spark, self.capture)
        coord.start()
        run = _Running(coord, SIMULATED_IDLE_SLEEP_MAX if self.simulated_time else IDLE_SLEEP_MAX)
        self._topologies[name] = run
        if not self.stepped:
            run.thread = threading.Thread(target=run.loop, name=f"squall-{name}", daemon=True)
            run.thread.start()

    def kill_topology(self, name: str, wait_secs: float = 0) -> None:
        """Deactivate the spouts, let what is in flight finish for `wait_secs`, then stop."""
        run = self._get(name)
        if wait_secs > 0:
            run.coord.set_active(False)
            if self.simulated_time:
                self.advance_time(wait_secs)
            else:
                time.sleep(wait_secs)
        run.stop.set()
        if run.thread is not None:
            run.thread.join()
        del self._topologies[name]
        run.coord.close()

    def activate(self, name: str) -> None:
        self._get(name).coord.set_active(True)

    def deactivate(self, name: str) -> None:
        self._get(name).coord.set_active(False)

    def _get(self, name: str) -> _Running:
        try:
            return self._topologies[name]
        except KeyError:
            raise KeyError(f"no topology named {name!r} is running; running: {sorted(self._topologies)}") from None

    def coordinator(self, name: str) -> Coordinator:
        return self._get(name).coord

    def started_at(self, name: str) -> float:
        """When a running topology was submitted (time.time())."""
        return self._get(name).started

    def topology_names(self) -> list[str]:
        """The names of the running topologies."""
        return sorted(self._topologies)

    def get_crash(self, name: str) -> BaseException | None:
        """The error that stopped a topology's wave loop, or None while it runs."""
        return self._get(name).crash

    def spout_instances(self, name: str, component: str | None = None) -> list[Any]:
        """A running topology's spout instances (of one component, or all), e.g. to ask whether
        a spout has read everything."""
        return self._get(name).coord.spout_instances(component)

    def get_topology_stats(self, name: str) -> dict[str, dict[str, Any]]:
        return self._get(name).coord.stats_dict()

    def get_errors(self, name: str) -> list[ErrorRecord]:
        return list(self._get(name).coord.errors)

    # -- time ---------------------------------------------------------------------------------

    def wait_idle(self, timeout_secs: float = 60) -> None:
        """Process until nothing can make progress (every spout idle, every tree settled or held)."""
        deadline = time.monotonic() + timeout_secs
        if self.simulated_time:
            self._drain(deadline)
            return
        for run in list(self._topologies.values()):
            with run.cond:
                start = run.coord.wave
                while run.idle_wave <= start and run.crash is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(
                            f"topology {run.coord.name!r} still busy after {timeout_secs}s (its spouts keep emitting?)"
                        )
                    run.cond.wait(min(left, 0.1))
                if run.crash is not None:
                    raise RuntimeError(f"topology {run.coord.name!r} stopped with an error") from run.crash

    def _drain(self, deadline: float) -> None:
        with self._steps():
            self._drain_held(deadline)

    def _steps(self) -> contextlib.ExitStack:
        """Every topology's wave loop held off: the caller steps them (simulated time)."""
        stack = contextlib.ExitStack()
        for run in list(self._topologies.values()):
            stack.enter_context(run.step)
        return stack

    def _drain_held(self, deadline: float) -> None:
        while True:
            progressed = False
            for run in list(self._topologies.values()):
                if run.crash is not None:
                    raise RuntimeError(f"topology {run.coord.name!r} stopped with an error") from run.crash
                if run.coord.run_wave().progressed:
                    progressed = True
            if not progressed:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("still busy: a spout keeps emitting, so the cluster never becomes idle")

    def advance_time(self, secs: float, idle_timeout_secs: float = 120) -> None:
        """Simulated time: process what can run, move the clock, fire what became due (timeouts,
        and ticks: the clock stops at each due time and a wave delivers what fell due then)."""
        if not self.simulated_time:
            raise RuntimeError("advance_time needs LocalCluster(simulated_time=True)")
        deadline = time.monotonic() + idle_timeout_secs
        with self._steps():  # the clock moves only between the caller's own waves
            self._drain_held(deadline)
            target = self.clock.now() + secs
            while True:
                due = [d for r in self._topologies.values() if (d := r.coord.next_due()) is not None]
                nxt = min((d for d in due if d <= target), default=None)
                if nxt is None:
                    break
                self.clock.set(nxt)
                for run in list(self._topologies.values()):
                    run.coord.fire_due()
                self._drain_held(deadline)
            self.clock.set(target)
            self._drain_held(deadline)
