"""The REST API's documents, built from a running topology's coordinator (Storm UI's field
names, camelCase). Pure functions of what the coordinator holds: no web framework here."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from squall.observe.windows import WINDOW_NAMES, F, figures

ERRORS_SHOWN = 50


class NotFound(LookupError):
    """An unknown topology or component: the API answers 404 with this message."""


class BadRequest(ValueError):
    """A query the API cannot answer (an unknown window): 400 with this message."""


def topology_status(coord: Any) -> str:
    if coord.closed:
        return "KILLED"
    return "ACTIVE" if coord.active else "INACTIVE"


def summary_entry(name: str, coord: Any, started: float) -> dict[str, Any]:
    return {
        "id": name, "name": name, "status": topology_status(coord),
        "uptimeSeconds": round(time.time() - started, 1),
        "tasksTotal": sum(s.parallelism for s in coord.topology.specs.values()),
        "engine": _engine(coord),
    }


def _engine(coord: Any) -> str:
    return getattr(coord.executor, "engine", "local")


def _component_sums(coord: Any, window: str, now: float) -> tuple[dict[str, np.ndarray], dict[int, np.ndarray], float]:
    """(per component summed FIELDS, per task FIELDS, the window's span in seconds)."""
    watch = coord.watch
    sums, span = watch.totals(window, now)
    per_task = {t: sums[i] for i, t in enumerate(watch.windows.task_ids)}
    per_comp = {c: sums[[watch.windows.row[t] for t in ids]].sum(axis=0)
                for c, ids in coord.topology.task_ids.items()}
    return per_comp, per_task, span


def _last_errors(coord: Any, component: str | None = None, limit: int = ERRORS_SHOWN) -> list[dict[str, Any]]:
    errs = [e for e in list(coord.errors) if component is None or e.component == component]
    return [{"component": e.component, "task": e.task, "kind": e.kind, "error": e.error, "traceback": e.traceback,
             "values": e.values, "time": e.time} for e in errs[-limit:][::-1]]


def _last_error_of(coord: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in list(coord.errors):
        out[e.component] = e.error
    return out


def _capacity(coord: Any, comp: str, per_task: dict[int, np.ndarray], span: float) -> float:
    """A component's capacity is its busiest task's (Storm: the max over executors)."""
    return max((figures(per_task[t], span)["capacity"] for t in coord.topology.task_ids[comp]), default=0.0)


def _topology_stats(coord: Any, now: float) -> list[dict[str, Any]]:
    """Storm's topology stats per window: emitted and transferred of every component; acked,
    failed and complete latency of the spouts (whole trees)."""
    spouts = list(coord.topology.spouts)
    rows = []
    for w in WINDOW_NAMES:
        per_comp, _, span = _component_sums(coord, w, now)
        total = sum(per_comp.values())
        sp = sum((per_comp[c] for c in spouts), np.zeros(len(F)))
        f = figures(sp, span)
        rows.append({"window": w, "emitted": int(total[F["emitted"]]), "transferred": int(total[F["transferred"]]),
                     "acked": f["acked"], "failed": f["failed"], "completeLatency": f["completeLatency"]})
    return rows


def _graph(coord: Any) -> dict[str, Any]:
    topo = coord.topology
    nodes = [{"id": c, "type": "spout" if s.is_spout else "bolt", "parallelism": s.parallelism,
              "level": topo.levels.get(c, 0)} for c, s in sorted(topo.specs.items())]
    edges = [{"source": sub.source, "target": c, "stream": sub.stream, "grouping": sub.grouping.kind}
             for c, s in sorted(topo.specs.items()) for sub in s.inputs]
    return {"nodes": nodes, "edges": edges}


def topology_page(name: str, coord: Any, started: float, window: str) -> dict[str, Any]:
    now = time.time()
    per_comp, per_task, span = _component_sums(coord, window, now)
    last = _last_error_of(coord)
    spouts, bolts = [], []
    for comp, spec in sorted(coord.topology.specs.items()):
        f = figures(per_comp[comp], span)
        common = {"tasks": spec.parallelism, "emitted": f["emitted"], "transferred": f["transferred"],
                  "acked": f["acked"], "failed": f["failed"], "errors": f["errors"], "lastError": last.get(comp, "")}
        if spec.is_spout:
            spouts.append({"spoutId": comp, **common, "completeLatency": f["completeLatency"]})
        else:
            bolts.append({"boltId": comp, **common, "executed": f["executed"], "executeLatency": f["executeLatency"],
                          "processLatency": f["processLatency"], "capacity": _capacity(coord, comp, per_task, span)})
    return {
        **summary_entry(name, coord, started), "window": window,
        "topologyStats": _topology_stats(coord, now), "spouts": spouts, "bolts": bolts,
        "failuresByReason": coord.watch.failures_by_reason(), "deadLettered": coord.dead_lettered,
        "lostWaves": coord.lost_waves, "pending": coord.pending_count, "waves": coord.waves_done,
        "sparkUiUrl": getattr(coord.executor, "ui_url", None), "graph": _graph(coord),
        "history": coord.watch.chart_points(), "errors": _last_errors(coord, limit=10),
        "userMetrics": user_metrics(coord),
    }


def component_page(name: str, coord: Any, component: str, window: str) -> dict[str, Any]:
    spec = coord.topology.specs.get(component)
    if spec is None:
        raise NotFound(f"topology {name!r} has no component {component!r}; its components: "
                       f"{sorted(coord.topology.specs)}")
    _, per_task, span = _component_sums(coord, window, time.time())
    board = coord.watch.metrics
    tasks = []
    for t in coord.topology.task_ids[component]:
        f = figures(per_task[t], span)
        if spec.is_spout:
            f = {k: f[k] for k in ("emitted", "transferred", "acked", "failed", "errors", "completeLatency")}
        else:
            f.pop("completeLatency")
        tot = board.of_task(component, t)
        tasks.append({"task": t, **f, "userMetrics": _task_metrics(tot)})
    return {"topologyId": name, "componentId": component, "componentType": "spout" if spec.is_spout else "bolt",
            "window": window, "tasks": tasks, "errors": _last_errors(coord, component),
            "userMetrics": user_metrics(coord).get(component, {})}


def _task_metrics(tot: Any) -> dict[str, Any]:
    if tot is None:
        return {}
    return {"counters": dict(tot.counters), "gauges": dict(tot.gauges),
            "histograms": {n: {"count": h.count, "sum": h.sum} for n, h in tot.histograms.items()}}


def user_metrics(coord: Any) -> dict[str, Any]:
    """Per component: counters and gauges (summed over tasks), histograms (count, sum, buckets)."""
    out = {}
    for comp, m in coord.watch.metrics.by_component().items():
        out[comp] = {
            "counters": m["counters"],
            "gauges": {n: g["sum"] for n, g in m["gauges"].items()},
            "histograms": {n: {"count": h.count, "sum": h.sum, "buckets": list(h.buckets), "counts": h.counts}
                           for n, h in m["histograms"].items()},
        }
    return out
