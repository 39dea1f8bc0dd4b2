"""Which wave a slot's death is charged to (squall.engine.resident.recovery): the one running,
or, with two in flight, neither, since the death cannot be told to one of them."""

from __future__ import annotations

from collections import OrderedDict
from types import SimpleNamespace

from squall.engine.resident.recovery import Logged, WaveRecovery


class Recovering(WaveRecovery):
    """The driver's recovery with its rollback and re-runs left out: only the blame is run."""

    def __init__(self, open_waves: list[int]):
        self._dead = {0}
        self.log = [Logged(n, [], 0) for n in (7, 8, 9)]
        self.open_waves = OrderedDict((n, SimpleNamespace(marker=SimpleNamespace(wave=n))) for n in open_waves)

    def _rollback(self, dead: set[int]) -> None:
        self.open_waves.clear()

    def _rerun(self) -> list:
        return []


def attempts(r: Recovering) -> dict[int, int]:
    return {e.wave: e.attempts for e in r.log}


def test_the_one_wave_running_counts_an_attempt() -> None:
    r = Recovering([9])
    r._recover()
    assert attempts(r) == {7: 0, 8: 0, 9: 1}


def test_with_two_in_flight_neither_counts_one() -> None:
    r = Recovering([8, 9])
    r._recover()
    assert attempts(r) == {7: 0, 8: 0, 9: 0}
