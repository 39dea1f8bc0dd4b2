"""How a wave's spout output reaches level 1 on Spark (engine/spark/spout_input.py): files on a
local master, held until a checkpoint cuts the lineage; bytes in the closure on a cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from squall.engine.spark.host_local import tasks_in_driver_jvm
from squall.engine.spark.records import Inputs
from squall.engine.spark.spout_input import DIR_PREFIX, SpoutInputs, records_for, remove_orphans


def recs(build: int, p: int) -> list:
    return [Inputs(build, [f"batch {build}.{p}".encode() * 100])]


@pytest.mark.parametrize("master,local", [("local", True), ("local[2]", True), ("local[*,4]", True),
                                          ("local-cluster[2,1,1024]", False), ("spark://host:7077", False),
                                          ("yarn", False)])
def test_local_masters(master, local):
    assert tasks_in_driver_jvm(master) is local


def test_a_local_master_writes_one_file_per_partition_and_a_task_reads_its_own(tmp_path):
    inputs = SpoutInputs("local[2]", str(tmp_path))
    carried = inputs.carry(1, {0: recs(1, 0), 1: recs(1, 1)})
    assert all(isinstance(v, str) and Path(v).parent == Path(inputs.dir) for v in carried.values())
    assert records_for(carried, 0) == recs(1, 0) and records_for(carried, 1) == recs(1, 1)
    assert records_for(carried, 2) == [] and records_for(None, 0) == []
    assert inputs.bytes_since_checkpoint == sum(os.path.getsize(v) for v in carried.values())
    inputs.checkpointing()
    assert inputs.bytes_since_checkpoint == 0
    inputs.close()
    assert not Path(inputs.dir).exists()


def test_a_cluster_master_keeps_the_input_in_the_closure(tmp_path):
    inputs = SpoutInputs("spark://host:7077", str(tmp_path))
    carried = inputs.carry(1, {0: recs(1, 0)})
    assert inputs.dir is None and isinstance(carried[0], bytes) and list(tmp_path.iterdir()) == []
    assert records_for(carried, 0) == recs(1, 0)
    assert inputs.bytes_since_checkpoint == 0  # Spark keeps a closure as long as its RDD: no early checkpoint


def test_a_file_that_cannot_be_written_leaves_its_records_in_the_closure(tmp_path, caplog):
    inputs = SpoutInputs("local[2]", str(tmp_path))
    Path(inputs.dir).rmdir()  # as good as a full disk: open() fails
    carried = inputs.carry(7, {0: recs(7, 0)})
    assert isinstance(carried[0], bytes) and records_for(carried, 0) == recs(7, 0)
    assert inputs.held_builds == [] and "could not be written" in caplog.text


def test_files_stay_until_a_later_checkpoint_is_written(tmp_path):
    inputs = SpoutInputs("local[2]", str(tmp_path))
    carried = {b: inputs.carry(b, {0: recs(b, 0), 1: recs(b, 1)}) for b in range(1, 6)}
    inputs.cut(3)
    assert inputs.held_builds == [4, 5] and inputs.cut_at == 3
    for b, paths in carried.items():
        assert all(Path(p).exists() is (b > 3) for p in paths.values())
    inputs.cut(2)  # an older checkpoint written late cuts nothing more
    assert inputs.held_builds == [4, 5] and inputs.cut_at == 3
    with pytest.raises(RuntimeError, match="spout input file .* is gone"):
        records_for(carried[1], 0)
    inputs.close()


def test_a_dead_drivers_directory_is_removed_a_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    orphan = tmp_path / f"{DIR_PREFIX}{int(dead.stdout)}-abc"
    orphan.mkdir()
    (orphan / "1-0").write_bytes(b"x")
    mine = SpoutInputs("local[2]", str(tmp_path))  # removes orphans on the way
    other = tmp_path / "unrelated"
    other.mkdir()
    remove_orphans(str(tmp_path))
    assert not orphan.exists() and Path(mine.dir).exists() and other.exists()
    mine.close()
