"""The worker's GC tuning: freeze once at setup, once more after the first task, never again.
Run in a fresh interpreter: freezing changes the collector of the whole process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent("""
    import gc, json
    from squall.engine import gc_tuning

    gc_tuning.freeze_after_first_task()  # before tune_gc: the process is not tuned, nothing happens
    untuned = gc.get_freeze_count()
    gc_tuning.tune_gc({})
    at_setup = gc.get_freeze_count()
    imported_later = [[i] for i in range(5000)]  # what a first task brings (modules, caches)
    gc_tuning.freeze_after_first_task()
    after_first = gc.get_freeze_count()
    more = [[i] for i in range(5000)]
    gc_tuning.freeze_after_first_task()  # once only
    after_second = gc.get_freeze_count()
    print(json.dumps([untuned, at_setup, after_first, after_second]))
""")


def _counts(script: str) -> list[int]:
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.strip().strip("[]").split(",")]


def test_a_tuned_worker_freezes_again_after_its_first_task_only() -> None:
    untuned, at_setup, after_first, after_second = _counts(_SCRIPT)
    assert untuned == 0
    assert at_setup > 0
    assert after_first >= at_setup + 5000  # what came after setup is frozen too
    assert after_second == after_first


def test_an_untuned_worker_is_left_alone() -> None:
    script = _SCRIPT.replace('gc_tuning.tune_gc({})', 'gc_tuning.tune_gc({"squall.gc.tune": False})')
    assert _counts(script) == [0, 0, 0, 0]
