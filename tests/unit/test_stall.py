"""The worker-loss stall (tests/support/netns_runs.py): the longest the stream stood still from
the kill on, whichever wave came first after it."""

import pytest

from tests.support.netns_runs import JobError, longest_stall


def test_a_wave_completing_just_after_the_kill_does_not_hide_the_stall_after_it():
    # a wave in flight completes 2 ms after the kill; the loss holds the next one 4 s
    assert longest_stall(100.0, [99.5, 100.002, 104.002, 104.1]) == pytest.approx(4.0)


def test_the_stall_is_kill_to_the_first_wave_when_that_is_the_longest_gap():
    assert longest_stall(100.0, [101.5, 101.6, 101.7]) == pytest.approx(1.5)


def test_no_wave_after_the_kill_is_an_error_not_a_zero_stall():
    with pytest.raises(JobError, match="no wave completed after the kill"):
        longest_stall(100.0, [98.0, 99.0])
