"""The REST API (Storm UI's paths and fields) against a running topology, on both engines:
its figures are the ones get_topology_stats gives; unknown names are 404, a bad window 400,
actions are POST only and do what they say."""

from __future__ import annotations

import pytest

from squall import Config, LocalCluster
from tests.support.ui_topology import build, expected, get, post, wait_for

N = 200


@pytest.fixture
def running(cluster_kwargs):
    with LocalCluster(ui_port=0, **cluster_kwargs) as cluster:
        cluster.submit_topology("metered", Config(), build(N))
        cluster.wait_idle(300)
        yield cluster


def test_topology_figures_equal_get_topology_stats(running):
    status, doc = get(running.ui_url + "api/v1/topology/metered")
    assert status == 200
    stats = running.get_topology_stats("metered")
    want = expected(N)
    (spout,) = doc["spouts"]
    assert spout["spoutId"] == "sentences"
    assert (spout["emitted"], spout["acked"], spout["failed"]) == (N, want["acked"], want["failed"])
    assert (spout["acked"], spout["failed"]) == (stats["sentences"]["acked"], stats["sentences"]["failed"])
    assert spout["completeLatency"] == pytest.approx(stats["sentences"]["complete_latency_ms"], rel=1e-3)
    bolts = {b["boltId"]: b for b in doc["bolts"]}
    for comp in ("split", "sink"):
        for k in ("executed", "emitted", "acked", "failed"):
            assert bolts[comp][k] == stats[comp][k], (comp, k)
        assert bolts[comp]["executeLatency"] == pytest.approx(stats[comp]["execute_latency_ms"], rel=1e-3)
        assert bolts[comp]["processLatency"] >= bolts[comp]["executeLatency"]
        assert 0 <= bolts[comp]["capacity"] <= 1
    assert bolts["split"]["executed"] == N and bolts["sink"]["executed"] == want["words"]
    assert bolts["split"]["transferred"] == want["words"]  # one target task per word (fields grouping)
    assert "ValueError: cannot split boom" in bolts["split"]["lastError"]
    assert doc["failuresByReason"] == {"failed": want["failed"] - 1, "error": 1}
    windows = {w["window"]: w for w in doc["topologyStats"]}
    assert set(windows) == {"600", "10800", "86400", ":all-time"}
    for w in windows.values():  # everything happened in the last 10 minutes
        assert (w["acked"], w["failed"], w["emitted"]) == (want["acked"], want["failed"], N + want["words"])
    assert doc["status"] == "ACTIVE" and doc["tasksTotal"] == 5
    assert {(e["source"], e["target"], e["grouping"]) for e in doc["graph"]["edges"]} == {
        ("sentences", "split", "shuffle"), ("split", "sink", "fields")}


def test_component_page_gives_each_task_and_the_errors(running):
    status, doc = get(running.ui_url + "api/v1/topology/metered/component/split?window=600")
    assert status == 200 and doc["componentType"] == "bolt" and doc["window"] == "600"
    assert [t["task"] for t in doc["tasks"]] == running.coordinator("metered").topology.task_ids["split"]
    assert sum(t["executed"] for t in doc["tasks"]) == N
    assert all(t["executed"] > 0 for t in doc["tasks"])  # shuffle grouping spreads the sentences
    (err,) = doc["errors"]
    assert err["error"] == "ValueError: cannot split boom" and "'boom'" in err["values"]
    assert "raise ValueError" in err["traceback"]
    status, spout = get(running.ui_url + "api/v1/topology/metered/component/sentences")
    assert status == 200 and spout["tasks"][0]["acked"] == expected(N)["acked"]


def test_summary_lists_the_topology(running):
    status, doc = get(running.ui_url + "api/v1/topology/summary")
    assert status == 200
    (t,) = doc["topologies"]
    assert (t["id"], t["name"], t["status"], t["tasksTotal"]) == ("metered", "metered", "ACTIVE", 5)
    assert t["uptimeSeconds"] >= 0


@pytest.mark.parametrize(("path", "code", "says"), [
    ("api/v1/topology/nope", 404, "no topology 'nope'"),
    ("api/v1/topology/nope/component/split", 404, "no topology 'nope'"),
    ("api/v1/topology/metered/component/nope", 404, "has no component 'nope'"),
    ("api/v1/topology/metered?window=60", 400, "unknown window '60'"),
    ("api/v1/topology/metered/component/split?window=day", 400, "unknown window 'day'"),
])
def test_errors_are_json_and_say_what_is_wrong(running, path, code, says):
    status, doc = get(running.ui_url + path)
    assert status == code and says in doc["error"]


def test_actions_are_post_only(running):
    status, _ = get(running.ui_url + "api/v1/topology/metered/kill")
    assert status == 405
    assert running.topology_names() == ["metered"]
    status, doc = post(running.ui_url + "api/v1/topology/nope/kill")
    assert status == 404


def test_deactivate_stops_the_spout_activate_resumes_kill_removes(cluster_kwargs):
    with LocalCluster(ui_port=0, **cluster_kwargs) as cluster:
        cluster.submit_topology("endless", Config(), build(None))
        url = cluster.ui_url + "api/v1/topology/endless"
        wait_for(lambda: get(url)[1]["spouts"][0]["acked"] > 0, "tuples acked")
        assert post(url + "/deactivate") == (200, {"topologyOperation": "deactivate", "topologyId": "endless",
                                                   "status": "success"})
        cluster.wait_idle(300)
        emitted = get(url)[1]["spouts"][0]["emitted"]
        cluster.wait_idle(300)  # more waves: the inactive spout is not asked for tuples
        doc = get(url)[1]
        assert doc["status"] == "INACTIVE" and doc["spouts"][0]["emitted"] == emitted
        assert post(url + "/activate")[0] == 200
        wait_for(lambda: get(url)[1]["spouts"][0]["emitted"] > emitted, "the spout emits again")
        assert post(url + "/kill")[0] == 200
        assert cluster.topology_names() == []
        assert get(cluster.ui_url + "api/v1/topology/summary")[1] == {"topologies": []}
        assert get(url)[0] == 404
