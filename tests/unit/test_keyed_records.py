"""A level's Spark step writes its records keyed for the shuffle; every reader (the next level,
the same level's next wave from the cache, the driver) gets back exactly its records."""

from __future__ import annotations

import pickle
import zlib

import numpy as np

from squall.engine.spark.records import Acks, Inputs, Report, State
from squall.engine.spark.worker import (
    KEY_BYTES,
    STATE_KEY,
    keyed_for_shuffle,
    records_of,
    this_wave,
    without_states,
)


def _out(wave: int) -> list[tuple[int, tuple]]:
    return [(0, State(wave, b"s" * 100)), (1, Inputs(wave, [b"batch-a"])), (0, Inputs(wave, [b"batch-b"])),
            (1, Acks(wave, np.array([3, 4], np.uint64), np.array([5, 6], np.uint64))),
            (1, Report(wave, "c", 7, (1, 0, 0, 0, 0.0, 0, 0.0), [], None, None))]


def test_keyed_output_comes_back_as_the_same_pairs_grouped_by_destination():
    out = _out(5)
    keyed = keyed_for_shuffle(out)
    keys = keyed[0::2]
    assert all(len(k) == KEY_BYTES for k in keys) and len(keys) == 3  # one list per destination, the State alone
    assert all(len(v) != KEY_BYTES for v in keyed[1::2])
    got = list(records_of(keyed))
    assert sorted(repr(p) for p in got) == sorted(repr(p) for p in out)
    assert repr(list(records_of(keyed[1::2]))) == repr(got)  # the shuffle hands on the lists without their keys


def test_a_task_keeps_its_own_earlier_state_and_this_waves_records_only():
    cached = keyed_for_shuffle(_out(4))  # its own output of the wave before
    shuffled = keyed_for_shuffle(_out(5))[1::2]  # the level before's output of this wave, State included
    got = this_wave(records_of(shuffled + cached), 5)
    states = [r for r in got if type(r) is State]
    assert [s.wave for s in states] == [4]  # its own; the level before's State is not its
    assert {r.wave for r in got if type(r) is not State} == {5}
    assert len(got) == 1 + 4


def test_states_travel_alone_and_are_left_out_by_their_key():
    keyed = keyed_for_shuffle(_out(9))
    flagged = [k for k in keyed[0::2] if int.from_bytes(k, "big", signed=True) & STATE_KEY]
    assert len(flagged) == 1  # the State, alone under its partition's key with STATE_KEY set
    kept = list(without_states(keyed))
    assert len(kept) == len(keyed) - 2 and all(len(k) == KEY_BYTES for k in kept[0::2])
    assert [type(r).__name__ for _, r in records_of(kept)].count("State") == 0
    assert len(list(records_of(kept))) == 4


def test_acks_travel_with_their_roots_as_small_steps():
    """Folded acks have their roots in order: pickled, 1-2 bytes a root instead of 8; roots in
    no order travel as they are. Both come back equal."""
    xors = np.arange(1, 5001, dtype=np.uint64)
    in_order = Acks(7, np.arange(1 << 40, (1 << 40) + 10_000, 2, dtype=np.uint64), xors)
    shuffled = Acks(7, np.random.default_rng(zlib.crc32(b"acks")).permutation(in_order.roots), xors)
    for acks in (in_order, shuffled):
        back = pickle.loads(pickle.dumps(acks, protocol=pickle.HIGHEST_PROTOCOL))
        assert type(back) is Acks and back.wave == 7
        assert back.roots.dtype == np.uint64 and back.roots.tolist() == acks.roots.tolist()
        assert back.xors.tolist() == xors.tolist()
    assert len(pickle.dumps(in_order)) < len(pickle.dumps(shuffled)) - 6 * 5000
