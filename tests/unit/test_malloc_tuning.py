"""glibc malloc tuning: a process that frees a wave's big arrays gets their memory back from its
heap next time, not as fresh pages from the kernel. Counted in page faults (work done, not
time), each case in a fresh interpreter: the thresholds hold for the whole process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from squall.engine.malloc_tuning import _is_glibc

pytestmark = pytest.mark.skipif(not _is_glibc(), reason="malloc tuning is for glibc's malloc only")

_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    from squall.engine import malloc_tuning

    tuned = malloc_tuning.tune_malloc(json.loads(sys.argv[1]))
    again = malloc_tuning.tune_malloc({})  # once per process: the first call's answer

    def wave():
        arrays = [np.ones(1 << 20) for _ in range(8)]  # 8 MB each, every page written
        del arrays

    wave()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        wave()
    print(json.dumps([tuned, again, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before]))
""")

PAGES_A_WAVE = 8 * (8 << 20) // 4096


def _run(conf: dict, env: dict | None = None) -> tuple[bool, bool, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    out = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(conf)], capture_output=True, text=True,
                         check=True, env={**clean, **(env or {})})
    tuned, again, faults = json.loads(out.stdout)
    return tuned, again, faults


def test_a_tuned_process_reuses_freed_arrays_instead_of_faulting_them_in_again() -> None:
    tuned, again, faults = _run({})
    untuned, _, faults_untuned = _run({"squall.malloc.tune": False})
    assert (tuned, again, untuned) == (True, True, False)
    assert faults_untuned > 2 * PAGES_A_WAVE  # glibc's defaults: a quarter of each wave's pages are new
    assert faults < PAGES_A_WAVE // 8  # tuned: less than one array's pages in all 20 waves (0 here)


def test_malloc_settings_from_the_environment_are_left_alone() -> None:
    tuned, _, faults = _run({}, {"MALLOC_TRIM_THRESHOLD_": str(1 << 20)})
    assert tuned is False
    assert faults > 2 * PAGES_A_WAVE
