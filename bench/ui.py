"""What the UI costs, and how fast its page loads. Prints ONE JSON line on stdout.

1. Word-count throughput (examples/wordcount.py's topology, bolt-tuples/s: the bolts' `executed`
   over a measured window after a warm-up) in three cases, run in turns `--repeats` times each
   and compared by their medians:
     - `no_watch`: the coordinator's UI figures switched off (its watch replaced by a no-op),
       the cost of recording them at all;
     - `off`: as squall runs without --ui (figures recorded, no server);
     - `ui`: LocalCluster(ui_port=0) with a client reading the topology document and /metrics
       once a second each, as an open page and a Prometheus scraper do.
   `ui_cost` = 1 - ui/off (goal <= 0.03); `watch_cost` = 1 - off/no_watch; `spread`: each case's
   (max - min) / median, the run-to-run noise on this machine that those two are within;
   `watch_time_share`: the time the wave thread spends recording the UI's figures, measured
   directly (the share of wall time in the watch's entry points, in the `off` case);
   `ui_thread_cpu_share`: the UI server thread's CPU time / wall time while polled (measured
   directly; under the GIL, what serving takes from the wave thread at most). On a loaded
   machine the throughput ratios are within `spread`; the two direct shares are not.
2. Page load with 50 components (1 spout, 49 bolts in 7 levels): Debian's chromium (Playwright)
   opens the topology page and waits until the bolts table has its 49 rows and the graph is
   drawn. `page_load_ms`: the median over `--loads` loads of the browser's own time from the
   start of navigation to the end of the page's first full render (performance.now(); goal
   <= 200 ms); `page_load_ms_seen_by_driver` adds Playwright's round trips to the browser.
   `api_ms`: the median time of GET /api/v1/topology/{id} for that topology. Null, with the
   reason, when the browser is missing.

    .venv/bin/python bench/ui.py [--engine local|spark] [--seconds 8] [--repeats 3] [--loads 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from squall import BasicBolt, Config, LocalCluster, Spout, TopologyBuilder  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
WARMUP_SECS = 2.0


def say(*a: Any) -> None:
    print(*a, file=sys.stderr, flush=True)


def load_example() -> Any:
    """examples/wordcount.py as `squall run` loads it: pickled by value, since Spark's Python
    workers cannot import it by name."""
    from squall.cli import load_topology_module

    mod = load_topology_module(str(ROOT / "examples" / "wordcount.py"))
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(mod)
    return mod


class _NoWatch:
    """Stands in for the coordinator's TopologyWatch: records nothing."""

    def __getattr__(self, name: str) -> Any:
        return self

    def __call__(self, *a: Any, **k: Any) -> None:
        return None

    def __contains__(self, item: Any) -> bool:
        return False


def _executed(cluster: LocalCluster, name: str) -> int:
    return sum(s.get("executed", 0) for s in cluster.get_topology_stats(name).values() if s["kind"] == "bolt")


def _poll(url: str, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        for path in ("api/v1/topology/wordcount", "metrics"):
            with urllib.request.urlopen(url + path, timeout=30) as r:
                r.read()


def _time_watch(watch: Any, spent: list[float]) -> None:
    """Count the time the coordinator spends in its watch's entry points (instance-level wrappers)."""
    for name in ("add_counters", "failed", "end_wave", "add"):
        fn = getattr(watch, name)

        def timed(*a: Any, _fn: Any = fn, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                spent[0] += time.perf_counter() - t0

        setattr(watch, name, timed)


def _thread_cpu(thread: threading.Thread) -> float:
    """CPU seconds a thread of this process has used (Linux: its own CPU clock)."""
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def throughput(example: Any, case: str, engine: str, spark: Any, seconds: float,
               watch_share: list[float] | None = None, ui_share: list[float] | None = None) -> float:
    kw: dict[str, Any] = {"engine": engine, "spark": spark}
    if case == "ui":
        kw["ui_port"] = 0
    with LocalCluster(**kw) as cluster:
        cluster.submit_topology("wordcount", example.CONF, example.build_topology())
        spent = [0.0]
        if case == "no_watch":
            cluster.coordinator("wordcount").watch = _NoWatch()
        elif watch_share is not None:
            _time_watch(cluster.coordinator("wordcount").watch, spent)
        stop = threading.Event()
        poller = None
        if case == "ui":
            poller = threading.Thread(target=_poll, args=(cluster.ui_url, stop), daemon=True)
            poller.start()
        time.sleep(WARMUP_SECS)
        ui_thread = cluster.ui.thread if cluster.ui is not None else None
        c0 = _thread_cpu(ui_thread) if ui_thread is not None else 0.0
        n0, t0, s0 = _executed(cluster, "wordcount"), time.perf_counter(), spent[0]
        time.sleep(seconds)
        n1, t1, s1 = _executed(cluster, "wordcount"), time.perf_counter(), spent[0]
        if ui_thread is not None and ui_share is not None:
            ui_share.append((_thread_cpu(ui_thread) - c0) / (t1 - t0))
        if watch_share is not None and case == "off":
            watch_share.append((s1 - s0) / (t1 - t0))
        stop.set()
        if poller is not None:
            poller.join()
    rate = (n1 - n0) / (t1 - t0)
    say(f"{case}: {rate:,.0f} bolt-tuples/s")
    return rate


class _Quiet(Spout):
    def declare_output_fields(self, d):
        d.declare(["n"])

    def open(self, conf, context, collector):
        self.collector, self.i = collector, 0

    def next_tuple(self):
        if self.i < 1000:
            self.collector.emit([self.i], msg_id=self.i)
            self.i += 1


class _Pass(BasicBolt):
    def declare_output_fields(self, d):
        d.declare(["n"])

    def execute(self, t, collector):
        collector.emit([t[0]])


def fifty_components() -> Any:
    """1 spout and 49 bolts: 7 levels of 7, each bolt reading the one before it in its column."""
    b = TopologyBuilder()
    b.set_spout("spout", _Quiet())
    for level in range(7):
        for col in range(7):
            src = "spout" if level == 0 else f"bolt-{level - 1}-{col}"
            b.set_bolt(f"bolt-{level}-{col}", _Pass()).shuffle_grouping(src)
    return b.create_topology()


def page_load(loads: int) -> dict[str, Any]:
    out: dict[str, Any] = {"page_load_ms": None, "api_ms": None, "components": 50}
    with LocalCluster(engine="local", ui_port=0) as cluster:
        cluster.submit_topology("fifty", Config(), fifty_components())
        cluster.wait_idle(120)
        url = cluster.ui_url
        api = []
        for _ in range(20):
            t0 = time.perf_counter()
            with urllib.request.urlopen(url + "api/v1/topology/fifty", timeout=30) as r:
                r.read()
            api.append(1000 * (time.perf_counter() - t0))
        out["api_ms"] = round(statistics.median(api), 1)
        try:
            from playwright.sync_api import sync_playwright  # noqa: PLC0415
        except ImportError as e:
            out["page_load_skipped"] = f"playwright is missing: {e}"
            return out
        if not Path(CHROMIUM).exists():
            out["page_load_skipped"] = f"{CHROMIUM} is missing"
            return out
        ready = ("() => document.querySelectorAll('#bolts-table tbody tr').length === 49 && "
                 "document.querySelectorAll('#graph .node').length === 50")
        times, in_page = [], []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1300, "height": 1800})
            for i in range(loads + 1):  # the first load warms the browser up and is left out
                t0 = time.perf_counter()
                page.goto(f"{url}?load={i}#/topology/fifty")
                page.wait_for_function(ready, timeout=60_000)
                if i:
                    times.append(1000 * (time.perf_counter() - t0))
                    in_page.append(page.evaluate("window.squallFirstRenderMs"))
            browser.close()
        out["page_load_ms"] = round(statistics.median(in_page), 1)
        out["page_load_ms_max"] = round(max(in_page), 1)
        out["page_load_ms_seen_by_driver"] = round(statistics.median(times), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=("local", "spark"), default="local")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--loads", type=int, default=10)
    args = p.parse_args(argv)
    example = load_example()
    spark = None
    if args.engine == "spark":
        from squall.engine.spark.session import get_or_create_session  # noqa: PLC0415

        spark = get_or_create_session("local[2]", app_name="squall-bench-ui")
    rates: dict[str, list[float]] = {"no_watch": [], "off": [], "ui": []}
    share: list[float] = []
    ui_share: list[float] = []
    for _ in range(args.repeats):
        for case in rates:
            rates[case].append(throughput(example, case, args.engine, spark, args.seconds, share, ui_share))
    med = {k: statistics.median(v) for k, v in rates.items()}
    result: dict[str, Any] = {
        "bench": "ui", "engine": args.engine, "seconds": args.seconds, "repeats": args.repeats,
        "tuples_per_sec": {k: round(v) for k, v in med.items()},
        "ui_cost": round(1 - med["ui"] / med["off"], 4),
        "watch_cost": round(1 - med["off"] / med["no_watch"], 4),
        "watch_time_share": round(statistics.median(share), 5),  # measured: time in the watch / wall time
        "ui_thread_cpu_share": round(statistics.median(ui_share), 5),  # the server thread's CPU / wall time
        "spread": {k: round((max(v) - min(v)) / statistics.median(v), 3) for k, v in rates.items()},
        "ui_cost_goal": 0.03,
    }
    result.update(page_load(args.loads))
    result["page_load_goal_ms"] = 200
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
