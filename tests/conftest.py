"""Shared fixtures: the engine parameter (every core scenario runs on both engines) and one
SparkSession per test run."""

from __future__ import annotations

import os
import sys

import pytest

ENGINES = ["local", "spark"]


@pytest.fixture(scope="session")
def spark_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from squall.engine.spark.session import get_or_create_session

    spark = get_or_create_session("local[2,4]", app_name="squall-tests")
    yield spark
    spark.stop()


@pytest.fixture(params=ENGINES)
def engine(request):
    return request.param


@pytest.fixture
def cluster_kwargs(engine, request):
    """LocalCluster(**cluster_kwargs) for the parametrized engine."""
    if engine == "spark":
        return {"engine": "spark", "spark": request.getfixturevalue("spark_session")}
    return {"engine": "local"}
