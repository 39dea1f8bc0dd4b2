"""User metrics (counter, gauge, histogram on TopologyContext) summed across tasks and waves
on both engines, and GET /metrics in Prometheus' text format, read back with
prometheus_client's own parser."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from squall import Config, LocalCluster
from squall.api.metrics import TaskMetrics
from squall.ui.prom import metric_name
from tests.support.ui_topology import build, expected, get

N = 300


@pytest.fixture
def finished(cluster_kwargs):
    conf = Config({"squall.wave.max.tuples": 40})  # many waves: metrics must add up across them
    with LocalCluster(ui_port=0, **cluster_kwargs) as cluster:
        cluster.submit_topology("metered", conf, build(N, split_tasks=3))
        cluster.wait_idle(300)
        yield cluster


def _families(cluster) -> dict:
    with urllib.request.urlopen(cluster.ui_url + "metrics", timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def _sample(fam, suffix: str = "", **labels) -> float:
    got = [s.value for s in fam.samples if s.name == fam.name + suffix
           and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(got) == 1, (fam.name, suffix, labels, fam.samples)
    return got[0]


def test_user_metrics_add_up_across_tasks_and_waves(finished):
    want = expected(N)
    coord = finished.coordinator("metered")
    assert coord.waves_done > 5
    doc = get(finished.ui_url + "api/v1/topology/metered")[1]["userMetrics"]
    split = doc["split"]
    assert split["counters"] == {"words": want["words"]}
    assert split["gauges"] == {"seen": N}  # each task's last reading (its own count), summed
    hist = split["histograms"]["word_length"]
    assert (hist["count"], hist["sum"]) == (want["words"], want["length_sum"])
    assert hist["buckets"] == [1, 2, 3, 4] and sum(hist["counts"]) == want["words"]
    assert doc["sentences"]["counters"] == {"spout_emits": N}
    assert doc["sentences"]["gauges"] == {"acked_so_far": want["acked"]}
    tasks = get(finished.ui_url + "api/v1/topology/metered/component/split")[1]["tasks"]
    assert len(tasks) == 3 and all(t["userMetrics"]["counters"]["words"] > 0 for t in tasks)
    assert sum(t["userMetrics"]["gauges"]["seen"] for t in tasks) == N


def test_prometheus_text_has_topology_and_user_metrics(finished):
    want = expected(N)
    stats = finished.get_topology_stats("metered")
    fams = _families(finished)
    assert all(name.startswith("squall_") for name in fams)
    acked = fams["squall_component_acked"]
    assert acked.type == "counter"
    assert _sample(acked, "_total", topology="metered", component="sentences") == want["acked"]
    assert _sample(fams["squall_component_executed"], "_total", component="sink") == stats["sink"]["executed"]
    assert _sample(fams["squall_failed_trees"], "_total", reason="error") == 1
    assert _sample(fams["squall_topology_active"], topology="metered") == 1
    assert _sample(fams["squall_pending_trees"], topology="metered") == 0
    assert _sample(fams["squall_user_words"], "_total", component="split") == want["words"]
    assert _sample(fams["squall_user_seen"], component="split") == N
    hist = fams["squall_user_word_length"]
    assert hist.type == "histogram"
    assert _sample(hist, "_count", component="split") == want["words"]
    assert _sample(hist, "_sum", component="split") == want["length_sum"]
    assert _sample(hist, "_bucket", component="split", le="+Inf") == want["words"]
    assert _sample(hist, "_bucket", component="split", le="2.0") <= _sample(hist, "_bucket", component="split",
                                                                               le="3.0")


def test_metric_registration_errors_name_the_component():
    m = TaskMetrics("split")
    m.counter("n").inc()
    with pytest.raises(ValueError, match="split: metric 'n' is already registered as a counter"):
        m.histogram("n")
    with pytest.raises(TypeError, match="gauge 'g' needs a function"):
        m.gauge("g", 3)
    with pytest.raises(ValueError, match="only goes up"):
        m.counter("n").inc(-1)
    m.gauge("broken", lambda: 1 / 0)
    assert m.take() == {"c": {"n": 1.0}, "g": {"broken": None}, "h": {}}
    assert m.take()["c"] == {"n": 0.0}  # changes since the last take
    assert metric_name("rows/s-in") == "rows_s_in" and metric_name("9lives") == "_9lives"
