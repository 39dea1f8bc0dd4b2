"""One run of the stateful word count for tests/state/test_state_kill.py, on the local engine.

argv: state_db ack_db n kind k. It runs until every sentence is acked (prints DONE), or, when
`kind` is not "none", pauses (prints PAUSED and waits to be SIGKILLed by the test) at the k-th
event of that kind: "execute" (the counting bolt executed k words), "prepare" / "commit" (the
k-th state prepare / commit returned: a kill between prepare and commit, or between commit and
the acks reaching the spout), "ack" (the spout recorded its k-th ack). Every word the bolt skips
as already committed prints SKIP.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from squall import Config, LocalCluster  # noqa: E402
from squall.state.providers import SqliteProvider  # noqa: E402
from tests.support.state_topology import CountWords, DurableSentenceSpout, build  # noqa: E402

state_db, ack_db, n, kind, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
seen = {"execute": 0, "prepare": 0, "commit": 0, "ack": 0}


def event(what: str) -> None:
    seen[what] += 1
    if what == kind and seen[what] == k:
        print("PAUSED", flush=True)
        time.sleep(3600)  # the test SIGKILLs this process now


def hooked(what: str, fn):
    def run(*args, **kwargs):
        out = fn(*args, **kwargs)
        event(what)
        return out
    return run


SqliteProvider.prepare = hooked("prepare", SqliteProvider.prepare)
SqliteProvider.commit = hooked("commit", SqliteProvider.commit)


class Spout(DurableSentenceSpout):
    def ack(self, msg_id):
        super().ack(msg_id)
        event("ack")


class Counter(CountWords):
    def execute(self, t):
        super().execute(t)
        if self.last_skipped:
            print("SKIP", flush=True)
        event("execute")


conf = Config({
    Config.TOPOLOGY_STATE_PROVIDER: "sqlite",
    Config.TOPOLOGY_STATE_PROVIDER_CONFIG: {"path": state_db},
    Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 50,
    Config.TOPOLOGY_MAX_SPOUT_PENDING: 60,
})
with LocalCluster(engine="local") as cluster:
    cluster.submit_topology("statekill", conf, build(n, ack_db, spout=Spout, counter=Counter).create_topology())
    spout = cluster.spout_instances("statekill", "sentences")[0]
    while len(spout.acked) < n:
        time.sleep(0.02)
        if cluster.get_crash("statekill") is not None:
            raise SystemExit(f"topology crashed: {cluster.get_crash('statekill')!r}")
print("DONE", flush=True)
