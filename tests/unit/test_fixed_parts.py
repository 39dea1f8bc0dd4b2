"""engine/tasks/fixed_parts.py: fixed attributes kept by token per process, watched for changes in place."""

from __future__ import annotations

import pickle

import pytest

from squall import BasicBolt
from squall.api.basic_bolt import BasicBoltExecutor
from squall.api.components import user_instance
from squall.engine.tasks import fixed_parts
from squall.engine.tasks.fixed_parts import FixedPart, Watch, fixed_names


@pytest.fixture(autouse=True)
def _empty_process_cache():
    fixed_parts._HELD.clear()
    fixed_parts._TOKEN_OF.clear()
    yield
    fixed_parts._HELD.clear()
    fixed_parts._TOKEN_OF.clear()


class CountingLoads:
    def __init__(self):
        self.calls = 0

    def __call__(self, blob: bytes):
        self.calls += 1
        return pickle.loads(blob)


def test_the_same_objects_only_by_identity():
    table = {"a": 1}
    watch = Watch({"table": table}, wave=1)
    assert watch.same_objects({"table": table})
    assert not watch.same_objects({"table": dict(table)})  # equal, but assigned anew
    assert not watch.same_objects({"table": table, "model": None})


def test_a_change_in_place_is_found_when_a_check_is_due():
    table = {"a": 1}
    watch = Watch({"table": table}, wave=10)
    assert watch.changed(wave=12, every=5) == []  # not due yet
    table["a"] = 2
    assert watch.changed(wave=14, every=5) == []  # still not due
    assert watch.changed(wave=15, every=5) == ["table"]
    assert watch.changed(wave=40, every=0) == []  # checks off


def test_an_unchanged_table_passes_every_check():
    watch = Watch({"table": {str(i): i for i in range(1000)}, "codes": [1, 2, 3]}, wave=0)
    assert all(watch.changed(wave=w, every=1) == [] for w in range(1, 6))


def test_what_the_standard_pickle_cannot_take_is_not_checked():
    watch = Watch({"fn": lambda x: x}, wave=0)
    assert watch.changed(wave=100, every=1) == []


def test_a_process_unpickles_a_token_once():
    loads = CountingLoads()
    part, made = fixed_parts.made(("t", 1), {"table": {"a": 1}}, 3, pickle.dumps, check=True)
    assert fixed_parts.received(("t", 1), part, 3, loads, True) is made  # made here: no unpickling
    assert loads.calls == 0
    fixed_parts.drop(("t", 1))
    got = fixed_parts.received(("t", 1), part, 4, loads, True)  # as another process would
    assert loads.calls == 1 and got.objects == {"table": {"a": 1}}
    assert fixed_parts.received(("t", 1), part, 5, loads, True) is got
    assert loads.calls == 1


def test_a_task_carrying_new_fixed_attributes_lets_the_old_go():
    old, _ = fixed_parts.made(("t", 1), {"table": {"a": 1}}, 1, pickle.dumps, check=False)
    new, _ = fixed_parts.made(("t", 1), {"table": {"a": 2}}, 2, pickle.dumps, check=False)
    assert old.token != new.token
    assert set(fixed_parts._HELD) == {new.token}
    loads = CountingLoads()
    assert fixed_parts.received(("t", 1), FixedPart(old.token, old.blob, 1), 3, loads, False).objects == {
        "table": {"a": 1}}  # an old State (a wave run again) still has its bytes
    assert loads.calls == 1


def test_the_user_bolt_inside_squall_wrappers():
    class Lookup(BasicBolt):
        fixed_attributes = ("table",)

    bolt = Lookup()
    assert user_instance(BasicBoltExecutor(bolt)) is bolt
    assert user_instance(bolt) is bolt
    assert fixed_names(BasicBoltExecutor(bolt)) == ()
    assert fixed_names(bolt) == ("table",)


def test_a_big_table_is_checked_less_often_in_proportion():
    table = {f"word{i}": i for i in range(200_000)}  # pickles to ~3 MB
    watch = Watch({"table": table}, wave=0)
    per = watch.size // fixed_parts.CHECK_BYTES
    assert per >= 2
    table["word1"] = -1
    assert watch.changed(wave=per * 5 - 1, every=5) == []  # not due: 5 waves per MB
    assert watch.changed(wave=per * 5, every=5) == ["table"]
