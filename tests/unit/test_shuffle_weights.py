"""Load-aware shuffle, our own logic: the weighted round robin of a shuffle grouping
(squall.routing.tuples), the driver's weights of its slots (squall.engine.resident.balance) and a
task's routing as a snapshot keeps it (squall.engine.tasks.task)."""

from __future__ import annotations

from collections import Counter

import pytest

from squall import Config, Spout, TopologyBuilder
from squall.engine.resident.balance import LIMIT, ShuffleBalance
from squall.engine.resident.messages import Report
from squall.engine.tasks.task import TaskBase
from squall.routing.tuples import ShuffleCounter, shuffle_counters, weighted_cycle
from tests.support.recovery_topologies import Digits


def test_equal_weights_are_plain_round_robin():
    assert weighted_cycle([1.0, 1.0, 1.0]) == [0, 1, 2]
    c = ShuffleCounter([10, 11, 12], start=1)
    c.weigh({10: 2.0, 11: 2.0, 12: 2.0})
    assert [c.pick(()) for _ in range(6)] == [1, 2, 0, 1, 2, 0]


def test_weights_give_proportional_and_spread_out_shares():
    cycle = weighted_cycle([1.0, 3.0])
    counts = Counter(cycle)
    assert counts[1] == 3 * counts[0]
    longest = max(len(run) for run in "".join(map(str, cycle)).split("0"))
    assert longest <= 3  # the heavy target's turns are spread between the light one's


def test_a_tiny_weight_still_gets_tuples():
    assert 0 in weighted_cycle([0.001, 1.0, 1.0])


def test_pick_call_and_positions_follow_one_sequence():
    tasks = [4, 5, 6]
    weight = {4: 0.5, 5: 1.0, 6: 2.5}
    a, b, c = ShuffleCounter(tasks, 2), ShuffleCounter(tasks, 2), ShuffleCounter(tasks, 2)
    for x in (a, b, c):
        x.weigh(weight)
    picks = [tasks[a.pick(())] for _ in range(50)]
    calls = [b(())[0] for _ in range(50)]
    cols = [tasks[p] for p in c.positions(20).tolist() + c.positions(30).tolist()]
    assert picks == calls == cols
    assert Counter(picks)[6] > Counter(picks)[5] > Counter(picks)[4]


def test_weighing_again_keeps_the_counter_in_range():
    c = ShuffleCounter([1, 2], 0)
    c.weigh({1: 1.0, 2: 9.0})
    for _ in range(37):
        c.pick(())
    c.weigh(None)
    assert c.cycle == [0, 1] and 0 <= c.i < 2
    assert sorted({c.pick(()) for _ in range(4)}) == [0, 1]


SLOT_OF = {10: 0, 11: 1, 12: 2}  # the shuffled bolt's three tasks, one a slot


def _reports(work: dict[int, float]) -> list[Report]:
    return [Report(1, slot, busy_secs=secs) for slot, secs in work.items()]


def test_balance_evens_out_the_slots_work():
    """A slot that also runs a spout (fixed work) gets fewer of the shuffled tuples until both
    slots' work is about even: the controller against a model of the slots."""
    fixed = {0: 0.004, 1: 0.0}  # a spout's work in slot 0, which no grouping moves
    shuffled = 0.010  # the shuffled bolt's work a wave, split by the weights
    bal = ShuffleBalance({10, 11, 12})
    weights = {0: 1.0, 1: 1.0}
    for _ in range(300):
        work = {s: fixed[s] + shuffled * weights[s] / sum(weights.values()) for s in fixed}
        bal.wave_ended(_reports(work), SLOT_OF)
        weights = bal.weights
    work = {s: fixed[s] + shuffled * weights[s] / sum(weights.values()) for s in fixed}
    assert abs(work[0] - work[1]) < 0.05 * sum(work.values())
    assert bal.shares is not None and bal.shares[0] < 1.0 < bal.shares[1]


def test_balance_never_starves_a_slot_and_ignores_light_waves():
    bal = ShuffleBalance({10, 11, 12})
    for _ in range(500):
        bal.wave_ended(_reports({0: 0.050, 1: 0.001}), SLOT_OF)
    assert min(bal.weights.values()) >= 1 / LIMIT - 1e-9
    idle = ShuffleBalance({10, 11, 12})
    for _ in range(50):
        idle.wave_ended(_reports({0: 0.0001, 1: 0.0}), SLOT_OF)
    assert idle.shares is None


def test_a_slot_without_shuffle_targets_takes_no_part():
    """Slot 2 runs only an acker (light): it must not draw the weight from the slots that can
    take shuffled work, or they end up even again at the floor."""
    bal = ShuffleBalance({10, 11})
    for _ in range(200):
        bal.wave_ended(_reports({0: 0.010, 1: 0.004, 2: 0.001}), SLOT_OF)
    assert set(bal.weights) == {0, 1}
    assert bal.weights[0] < 1.0 < bal.weights[1]


def test_a_slot_that_leaves_drops_out_of_the_balance():
    bal = ShuffleBalance({10, 11, 12})
    for _ in range(20):
        bal.wave_ended(_reports({0: 0.010, 1: 0.002, 2: 0.002}), SLOT_OF)
    bal.wave_ended(_reports({0: 0.010, 2: 0.002}), SLOT_OF)
    assert set(bal.weights) == {0, 2}


class Numbers(Spout):
    def declare_output_fields(self, d):
        d.declare(["n"])


@pytest.mark.parametrize("grouping,off,expected", [
    ("shuffle", False, True), ("shuffle", True, False), ("fields", False, False)])
def test_balance_only_for_shuffles_unless_turned_off(grouping, off, expected):
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    d = b.set_bolt("digits", Digits(), parallelism=2)
    d.shuffle_grouping("numbers") if grouping == "shuffle" else d.fields_grouping("numbers", ["n"])
    conf = {Config.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING: off}
    assert (ShuffleBalance.of(b.create_topology(), conf) is not None) is expected
    assert (ShuffleBalance.of(b.create_topology(), {}) is not None) is (grouping == "shuffle")  # on, as Storm


def test_markers_carry_weights_by_target_task():
    bal = ShuffleBalance({10, 11, 12})
    assert bal.task_weights(SLOT_OF) is None  # even: plain round robin
    for _ in range(10):
        bal.wave_ended(_reports({0: 0.010, 1: 0.002, 2: 0.002}), SLOT_OF)
    weights = bal.task_weights(SLOT_OF)
    assert weights == {t: bal.shares[s] for t, s in SLOT_OF.items()} and weights[10] < weights[11]


def _shuffling_task() -> TaskBase:
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("digits", Digits(), parallelism=3).shuffle_grouping("numbers")
    return TaskBase(b.create_topology(), "numbers", 0, {}, False)


def _targets(task: TaskBase, n: int) -> list[int]:
    counter = shuffle_counters(task.streams.values())[0]
    return [counter(())[0] for _ in range(n)]


def test_a_restored_task_routes_as_the_task_it_was_taken_from():
    """The snapshot's routing keeps the weights with the positions: a wave run again after a
    rollback sends each tuple where it first went, whatever the weights were meanwhile."""
    task = _shuffling_task()
    weights = dict(zip(task.topology.task_ids["digits"], (0.4, 1.0, 1.6)))
    task.weigh(weights)
    _targets(task, 37)
    state = task.routing_state()
    first = _targets(task, 100)
    again = _shuffling_task()
    again.weigh({t: 1.0 + i for i, t in enumerate(task.topology.task_ids["digits"])})  # later waves' weights
    again.restore_routing(state)
    assert _targets(again, 100) == first
    assert Counter(first)[task.topology.task_ids["digits"][0]] < Counter(first)[task.topology.task_ids["digits"][2]]


def test_weighing_with_the_same_weights_keeps_the_position():
    task = _shuffling_task()
    weights = dict(zip(task.topology.task_ids["digits"], (0.5, 1.0, 1.5)))
    task.weigh(weights)
    _targets(task, 11)
    i = shuffle_counters(task.streams.values())[0].i
    task.weigh(dict(weights))  # the next wave's marker: an equal dict
    assert shuffle_counters(task.streams.values())[0].i == i == 11
