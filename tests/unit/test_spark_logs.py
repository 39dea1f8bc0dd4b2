"""squall's Spark log files and temp checkpoint dirs do not pile up in the temp dir: the newest logs are
kept, the rest go; a checkpoint dir goes with its process."""

from __future__ import annotations

import os

from squall.engine.spark.logs import prune_logs

DAY = 86400.0


def _log(folder, name: str, mtime: float) -> str:
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write("x")
    os.utime(path, (mtime, mtime))
    return path


def test_keeps_the_newest_and_drops_the_old(tmp_path):
    now = 1_800_000_000.0
    paths = [_log(tmp_path, f"spark-app-{i:02d}.log", now - i * 60) for i in range(6)]
    stale = _log(tmp_path, "spark-old.log", now - 8 * DAY)
    other = _log(tmp_path, "notes.txt", now - 30 * DAY)  # not squall's: never touched

    removed = prune_logs(str(tmp_path), keep=4, max_age_days=7, now=now)

    assert sorted(removed) == sorted(paths[4:] + [stale])
    assert all(os.path.exists(p) for p in paths[:4])
    assert os.path.exists(other)


def test_an_empty_folder_is_fine(tmp_path):
    assert prune_logs(str(tmp_path)) == []


def test_the_temp_checkpoint_dir_goes_when_the_process_exits(tmp_path):
    """A process that made one (with a checkpointed file in it, as Spark writes) leaves nothing."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    code = ("import os, sys; from squall.engine.spark.session import temp_checkpoint_dir; d = temp_checkpoint_dir(); "
            "os.makedirs(os.path.join(d, 'rdd-1')); open(os.path.join(d, 'rdd-1', 'part-0'), 'w').write('x'); print(d)")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    made = out.stdout.strip()
    assert made.startswith(str(tmp_path)) and os.path.basename(made).startswith("squall-checkpoints-")
    assert not os.path.exists(made) and os.listdir(tmp_path) == []
