"""Instructions a bolt-tuple of the seed word count costs on the local engine, counted by valgrind's
callgrind. Prints one JSON line.

Timings of the same code on this machine vary by 5% and more from run to run, so a change that
saves a few percent of the per-tuple path cannot be told from noise by timing it. An instruction
count can: the same code and sentences count within about 1% from run to run. The local engine runs
the same tasks, collectors and acking as the slots do, in one process and without their messaging,
so this measures the per-tuple path alone. Waves are of a fixed size here (callgrind's slowness
would otherwise make them smaller). The count is for comparing two versions of the code, not a
cost in time: it comes out higher than a bolt-tuple's time would allow, probably from work the
engine does per unit of time, which callgrind's slowness multiplies.

The topology (examples/wordcount.py, the seed's split by default, `--split basic` for a BasicBolt)
runs twice under callgrind, once for `--base` sentences and once for `--base` + `--sentences`; the
difference leaves out what both pay once (imports, starting the engine, the first waves):

    .venv/bin/python bench/instructions.py [--sentences 10000] [--base 2000] [--split anchoring|basic]

`instructions_per_bolt_tuple` is the figure to compare between two versions of the code. The
bench takes about 35 s (callgrind runs Python some 50 times slower).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "wordcount.py"
MAX_PENDING = 50000
WAVE_SENTENCES = 5000
UNTIMED_SECS = 3600.0
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def run_child(sentences: int, split: str) -> int:
    """Run the word count for `sentences` sentences on the local engine (under callgrind, by the
    parent); the bolt-tuples it executed."""
    sys.path.insert(0, str(ROOT))
    logging.getLogger("squall").setLevel(logging.ERROR)
    from squall import Config, LocalCluster  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("wordcount_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    conf = Config(example.CONF)
    conf[Config.TOPOLOGY_MAX_SPOUT_PENDING] = MAX_PENDING
    # Waves of WAVE_SENTENCES, not sized by their time: callgrind runs everything ~50 times slower,
    # and waves cut by time would be that much smaller than without it
    conf[Config.SQUALL_WAVE_MAX_TUPLES] = WAVE_SENTENCES
    conf[Config.SQUALL_WAVE_MAX_SECS] = conf[Config.SQUALL_WAVE_TARGET_SECS] = UNTIMED_SECS
    with LocalCluster(engine="local") as cluster:
        cluster.submit_topology("count", conf, example.build_topology(parallelism=2, limit=sentences, split=split))
        while cluster.get_topology_stats("count")["sentences"]["acked"] < sentences:
            time.sleep(1.0)
        stats = cluster.get_topology_stats("count")
        cluster.kill_topology("count")
    return sum(v.get("executed", 0) for k, v in stats.items() if k != "sentences")


def collected(stderr: str) -> int:
    """The instruction count callgrind reports at its exit ("Collected : N")."""
    m = COLLECTED.search(stderr)
    if m is None:
        raise RuntimeError(f"callgrind reported no instruction count; its output ended:\n{stderr[-2000:]}")
    return int(m.group(1))


def counted(sentences: int, split: str) -> tuple[int, int]:
    """(instructions, bolt-tuples) of one run of `sentences` sentences under callgrind."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
           "--child", str(sentences), "--split", split]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return collected(done.stderr), int(done.stdout.strip().splitlines()[-1])


def per_tuple(small: tuple[int, int], large: tuple[int, int], sentences: int) -> dict[str, Any]:
    """The figures of the difference between two runs, (instructions, bolt-tuples) each."""
    instructions, tuples = large[0] - small[0], large[1] - small[1]
    return {"instructions_per_bolt_tuple": round(instructions / tuples),
            "instructions_per_sentence": round(instructions / sentences),
            "bolt_tuples": tuples, "instructions": instructions}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, default=10000, help="sentences counted (default 10,000)")
    p.add_argument("--base", type=int, default=2000, help="sentences of the run subtracted (default 2,000)")
    p.add_argument("--split", choices=("anchoring", "basic"), default="anchoring")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        print(run_child(args.child, args.split))
        return 0
    if shutil.which("valgrind") is None:
        print("bench/instructions.py needs valgrind (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    small = counted(args.base, args.split)
    large = counted(args.base + args.sentences, args.split)
    print(json.dumps({"bench": "instructions", "engine": "local", "split": args.split,
                      "sentences": args.sentences, "base_sentences": args.base,
                      **per_tuple(small, large, args.sentences)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
