"""The settings squall starts its SparkSession with (engine/spark/session.py)."""

from __future__ import annotations

import pytest

from squall.engine.spark import session
from squall.engine.spark.session import LOCAL_JAVA_OPTIONS, _settings

JAVA = "spark.driver.extraJavaOptions"


@pytest.fixture(autouse=True)
def worker_env(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "python3")
    monkeypatch.setenv("PYTHONPATH", "")
    monkeypatch.delenv("SQUALL_SPARK_JAVA_OPTIONS", raising=False)


@pytest.mark.parametrize("master", [None, "local", "local[2]", "local[*,4]"])
def test_a_local_master_runs_the_jvm_with_c1_alone(master):
    settings = _settings(master, "app", False, None)
    assert settings["spark.master"] == (master or session.DEFAULT_MASTER)
    assert settings[JAVA] == LOCAL_JAVA_OPTIONS == "-XX:TieredStopAtLevel=1"


@pytest.mark.parametrize("master", ["spark://host:7077", "local-cluster[2,1,1024]", "yarn"])
def test_a_cluster_master_keeps_the_jvm_defaults(master):
    assert JAVA not in _settings(master, "app", False, None)


def test_the_environment_and_the_callers_conf_decide_first(monkeypatch):
    monkeypatch.setenv("SQUALL_SPARK_JAVA_OPTIONS", "")
    assert JAVA not in _settings("local[2]", "app", False, None)
    monkeypatch.setenv("SQUALL_SPARK_JAVA_OPTIONS", "-Xss4m")
    assert _settings("local[2]", "app", False, None)[JAVA] == "-Xss4m"
    assert _settings("local[2]", "app", False, {JAVA: "-Xmx1g"})[JAVA] == "-Xmx1g"


def test_shuffles_take_the_sort_writer_unless_the_caller_says_otherwise():
    bypass = "spark.shuffle.sort.bypassMergeThreshold"
    assert _settings("local[2]", "app", False, None)[bypass] == "0"
    assert _settings("spark://host:7077", "app", False, None)[bypass] == "0"
    assert _settings("local[2]", "app", False, {bypass: "200"})[bypass] == "200"
