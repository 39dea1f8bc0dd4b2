"""The batch coordinator's metadata store failing now and then (a cut connection to PostgreSQL, as
the chaos harness does): every step that must be recorded is tried again, and no batch is stuck or
counted twice; both engines."""

from __future__ import annotations

import zlib
from collections import Counter

from squall import LocalCluster
from squall.trident import Count, FixedBatchSpout, MemoryMapState, TridentTopology
from squall.trident.coordinator import DictMetaStore
from tests.support.trident_helpers import Split

SENTENCES = [[f"w{i % 7} w{i % 3} x"] for i in range(40)]


class FlakyStore(DictMetaStore):
    """A quarter of the writes fail, as a store whose connection was cut: which ones is fixed by the write's
    number (not periodic, so no cycle of writes can always meet the failure)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.failures = 0

    def put(self, key: str, value: bytes) -> None:
        self.writes += 1
        if zlib.crc32(str(self.writes).encode()) % 4 == 0:
            self.failures += 1
            raise ConnectionError(f"connection cut while writing {key}")
        super().put(key, value)


class FlakyMetaFactory:
    """A memory state whose coordinator's store is a `FlakyStore` (the one this factory keeps)."""

    def __init__(self) -> None:
        self.inner = MemoryMapState.factory("transactional")
        self.kind = self.inner.kind
        self.store = FlakyStore()

    def __deepcopy__(self, memo):
        return self

    def make_state(self, conf, partition_index, num_partitions):
        return self.inner.make_state(conf, partition_index, num_partitions)

    def meta_store(self, conf=None):
        return self.store

    def describe(self):
        return "memory, with a flaky coordinator store"

    def __getattr__(self, name):
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def test_a_failing_metadata_store_neither_stalls_nor_double_counts(cluster_kwargs):
    factory = FlakyMetaFactory()
    t = TridentTopology()
    state = (t.new_stream("s", FixedBatchSpout(["sentence"], 3, *SENTENCES)).each(["sentence"], Split(), ["word"])
             .group_by(["word"]).persistent_aggregate(factory, Count(), ["count"]))
    truth = Counter(w for (s,) in SENTENCES for w in s.split())
    with LocalCluster(simulated_time=True, stepped=True, **cluster_kwargs) as cluster:
        cluster.submit_topology("flaky", {}, t.build())
        (coordinator,) = cluster.spout_instances("flaky")
        for _ in range(100):  # a wave whose spout call failed did nothing: idle to the cluster, not to Trident
            cluster.wait_idle(120)
            if coordinator.idle:
                break
        assert coordinator.committed == 14 and coordinator.idle  # 40 sentences in batches of 3
        words = sorted(truth)
        assert state.multi_get([[w] for w in words]) == [truth[w] for w in words]
    assert factory.store.failures > 10
