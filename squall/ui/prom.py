"""GET /metrics: every running topology's figures and user metrics in Prometheus' text format,
written by prometheus_client from a collector that reads the coordinators when scraped."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from squall.observe.windows import ALL_TIME
from squall.ui import views

_COUNTS = ("emitted", "transferred", "executed", "acked", "failed", "errors")
_BAD = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(name: str) -> str:
    """A user metric's name made valid for Prometheus (other characters become '_')."""
    out = _BAD.sub("_", name)
    return out if not out[:1].isdigit() else "_" + out


class SquallCollector:
    """Reads the cluster's coordinators at each scrape (no state of its own)."""

    def __init__(self, cluster: Any):
        self.cluster = cluster

    def collect(self) -> Iterator[Metric]:
        fams = _families()
        for name in self.cluster.topology_names():
            try:
                coord = self.cluster.coordinator(name)
            except KeyError:  # killed meanwhile
                continue
            _topology(fams, name, coord)
            yield from _user(name, coord)
        yield from fams.values()


def _families() -> dict[str, Metric]:
    fams: dict[str, Metric] = {}
    for c in _COUNTS:
        fams[c] = CounterMetricFamily(f"squall_component_{c}", f"tuples {c} by a component, since it started",
                                      labels=["topology", "component", "type"])
    fams["pending"] = GaugeMetricFamily("squall_pending_trees", "tuple trees not yet acked or failed",
                                        labels=["topology"])
    fams["dead"] = CounterMetricFamily("squall_dead_lettered", "spout tuples sent to the dead letters",
                                       labels=["topology"])
    fams["lost"] = CounterMetricFamily("squall_lost_waves", "waves whose Spark job died", labels=["topology"])
    fams["reasons"] = CounterMetricFamily("squall_failed_trees", "failed tuple trees by reason",
                                          labels=["topology", "reason"])
    fams["active"] = GaugeMetricFamily("squall_topology_active", "1 while the spouts are active", labels=["topology"])
    fams["complete"] = GaugeMetricFamily("squall_complete_latency_ms", "mean ms from spout emit to tree ack",
                                         labels=["topology", "component"])
    fams["execute"] = GaugeMetricFamily("squall_execute_latency_ms", "mean ms in execute per tuple",
                                        labels=["topology", "component"])
    fams["capacity"] = GaugeMetricFamily("squall_capacity", "busiest task's share of the last 10 minutes in execute",
                                         labels=["topology", "component"])
    return fams


def _topology(fams: dict[str, Metric], name: str, coord: Any) -> None:
    page = views.topology_page(name, coord, 0.0, ALL_TIME)
    ten = views.topology_page(name, coord, 0.0, "600")
    for row in page["spouts"] + page["bolts"]:
        comp, kind = row.get("spoutId") or row["boltId"], "spout" if "spoutId" in row else "bolt"
        for c in _COUNTS:
            if c in row:
                fams[c].add_metric([name, comp, kind], row[c])
        if kind == "spout" and row["completeLatency"] is not None:
            fams["complete"].add_metric([name, comp], row["completeLatency"])
        if kind == "bolt" and row["executeLatency"] is not None:
            fams["execute"].add_metric([name, comp], row["executeLatency"])
    for row in ten["bolts"]:
        fams["capacity"].add_metric([name, row["boltId"]], row["capacity"])
    fams["pending"].add_metric([name], coord.pending_count)
    fams["dead"].add_metric([name], coord.dead_lettered)
    fams["lost"].add_metric([name], coord.lost_waves)
    fams["active"].add_metric([name], 1.0 if page["status"] == "ACTIVE" else 0.0)
    for reason, n in sorted(coord.watch.failures_by_reason().items()):
        fams["reasons"].add_metric([name, reason], n)


def _user(name: str, coord: Any) -> Iterator[Metric]:
    """User metrics as squall_user_<name>, labelled by topology and component."""
    counters: dict[str, Metric] = {}
    gauges: dict[str, Metric] = {}
    hists: dict[str, Metric] = {}
    for comp, m in sorted(coord.watch.metrics.by_component().items()):
        for n, v in m["counters"].items():
            fam = counters.setdefault(n, CounterMetricFamily(f"squall_user_{metric_name(n)}", f"user counter {n}",
                                                             labels=["topology", "component"]))
            fam.add_metric([name, comp], v)
        for n, g in m["gauges"].items():
            fam = gauges.setdefault(n, GaugeMetricFamily(f"squall_user_{metric_name(n)}",
                                                         f"user gauge {n} (summed over tasks)",
                                                         labels=["topology", "component"]))
            fam.add_metric([name, comp], g["sum"])
        for n, h in m["histograms"].items():
            fam = hists.setdefault(n, HistogramMetricFamily(f"squall_user_{metric_name(n)}", f"user histogram {n}",
                                                            labels=["topology", "component"]))
            cum, buckets = 0, []
            for le, c in zip([*map(_le, h.buckets), "+Inf"], h.counts):
                cum += c
                buckets.append((le, cum))
            fam.add_metric([name, comp], buckets, h.sum)
    yield from counters.values()
    yield from gauges.values()
    yield from hists.values()


def _le(b: float) -> str:
    return repr(float(b))


def metrics_text(cluster: Any) -> tuple[bytes, str]:
    """The exposition text and its content type."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SquallCollector(cluster))
    return generate_latest(registry), CONTENT_TYPE_LATEST

