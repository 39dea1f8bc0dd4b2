"""A batch gone astray, simulated: a task class's first Settled records of one component are
dropped, and the topology runs on the local engine; its wave must be lost and replayed whole."""

from __future__ import annotations

from typing import Any

from squall import Config, LocalCluster


def run_dropping_first_settled(monkeypatch: Any, task_cls: type, component: str, topology: Any,
                               n: int, sender: str) -> None:
    """Run `topology` (spout "s" with msg ids 0..n-1, replaying what fails) with `component`'s
    first Settled dropped; checks the wave was lost, replayed whole, and the error says so."""
    run = task_cls.run
    dropped: list = []

    def lossy(self: Any, inbox: Any, wave: int, now: float | None = None) -> Any:
        res = run(self, inbox, wave, now)
        if self.component == component and not dropped and res.settled:
            dropped.extend(res.settled)
            res.settled = []
        return res

    monkeypatch.setattr(task_cls, "run", lossy)
    cluster = LocalCluster(simulated_time=True, stepped=True, engine="local")
    cluster.submit_topology("t", {Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30, Config.TOPOLOGY_MAX_SPOUT_PENDING: 20000},
                            topology)
    with cluster:
        cluster.wait_idle()
        spout = cluster.spout_instances("t", "s")[0]
        assert dropped
        assert sorted(spout.failed) == list(range(n))  # the lost wave's tuples, every one
        assert sorted(spout.acked) == list(range(n))  # and their replay
        assert any(f"{sender}[" in e.error and "came back settled for 0" in e.error for e in cluster.get_errors("t"))
