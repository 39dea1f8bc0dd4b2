"""The chaos harness's CI-sized subset (tests/support/chaos.py; bench/chaos.py runs 20 seeds of 10
kills): seeded runs of three topologies (Redis Streams at-least-once, a stateful bolt and a Trident
PostgreSQL count exactly-once) with 10 slot SIGKILLs each at points of work done (the second seed
also cuts every Redis and PostgreSQL connection twice), and one run whose driver process is
SIGKILLed twice (then started again from the same conf) besides 4 slot kills and 2 cuts, and one
run on a namespace cluster of 3 worker hosts where 2 hosts are SIGKILLed (a new one joining after
each) besides 2 slot kills and a cut. Nothing is lost, nothing counted twice, no state is lost,
and every poison message is dead-lettered: 30 kills in all (2 of a driver, 2 of a host)."""

from __future__ import annotations

import os

import pytest

from tests.support.broker_services import need_postgres, need_redis
from tests.support.chaos import run_once, run_with_driver_kills
from tests.support.netns_cluster import NetnsCluster, unavailable_reason

pytestmark = pytest.mark.spark

SEEDS = (101, 102)
KILLS = 10
CUTS = {101: 0, 102: 2}


@pytest.mark.parametrize("seed", SEEDS)
def test_random_slot_kills_and_cuts_lose_nothing_and_count_nothing_twice(spark_session, seed):
    redis_url = need_redis()
    need_postgres()
    result = run_once(spark_session, seed, KILLS, redis_url, cuts=CUTS[seed])
    assert (result.kills, result.cuts) == (KILLS, CUTS[seed]), result.problems
    assert result.rollbacks > 0  # the kills landed while work was in flight
    assert (result.lost, result.duplicated_exactly_once, result.state_lost) == (0, 0, 0), result
    assert not result.problems, result.problems


def test_driver_kills_restarts_and_cuts_lose_nothing_and_count_nothing_twice():
    redis_url = need_redis()
    need_postgres()
    result = run_with_driver_kills(103, 4, 2, redis_url, cuts=2)
    assert (result.kills, result.driver_kills, result.cuts) == (6, 2, 2), result.problems
    assert result.connections_cut > 0
    assert (result.lost, result.duplicated_exactly_once, result.state_lost) == (0, 0, 0), result
    assert not result.problems, result.problems


def test_host_kills_on_a_namespace_cluster_lose_nothing_and_count_nothing_twice(tmp_path):
    reason = unavailable_reason()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and the namespace cluster cannot run: {reason}")
        pytest.skip(f"the namespace cluster cannot run: {reason}")
    redis_url = need_redis()
    need_postgres()
    from tests.support.worker_venv import worker_python  # noqa: PLC0415 - builds a venv: only when it runs

    with NetnsCluster(tmp_path, workers=3, cores=1, worker_python=worker_python()) as hosts:
        result = run_with_driver_kills(104, 2, 0, redis_url, cuts=1, hosts=hosts, host_kills=2)
    assert (result.kills, result.host_kills, result.cuts) == (4, 2, 1), result.problems
    assert (result.lost, result.duplicated_exactly_once, result.state_lost) == (0, 0, 0), result
    assert not result.problems, result.problems
