"""examples/windowed_wordcount.py, small: every window's size and top counts are those of the
last `window` words that reached it, and sentences are acked when their words left the windows;
both engines agree."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

from squall.testing import complete_topology

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load():
    spec = importlib.util.spec_from_file_location("windowed_wordcount", EXAMPLES / "windowed_wordcount.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_windowed_wordcount_counts_each_window(engine, cluster_kwargs):
    ex = load()
    sentences = [["a b c"], ["b c d e"], ["c d"], ["e e e a"], ["b"], ["a a c d"], ["d e"]]
    spark = cluster_kwargs.get("spark")
    result = complete_topology(ex.build_topology(parallelism=1, window=6, interval=3),
                               mocked_sources={"sentences": sentences}, engine=engine, spark=spark)
    words = [w for s in sentences for w in s[0].split()]  # one split task: words reach the window in order
    got = result.emitted("top")
    assert [size for _, size in got] == [3, 6, 6, 6, 6, 6]
    for k, (top, _) in enumerate(got):
        last = Counter(words[max(0, 3 * (k + 1) - 6): 3 * (k + 1)])
        assert [c for _, c in top] == [c for _, c in last.most_common(3)]
        assert all(last[w] == c for w, c in top)
    # words 1..15 are in no window after the one at 18 words (the next, at 21, holds 16..21): their
    # sentences are acked; the last two sentences' words wait for a window that never comes, and time out
    assert sorted(result.acked("sentences")) == [0, 1, 2, 3, 4]
    assert sorted(result.failed("sentences")) == [5, 6]
