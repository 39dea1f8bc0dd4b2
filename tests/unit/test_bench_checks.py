"""The benchmarks' own checks: bench/wordcount.py must fail (exit status 1) when any compared
system's word counts are wrong, and bench/acker.py must charge the driver's memory to the right
owner. The benches are scripts, not a package, so they are loaded from their files."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as module `bench_<name>` (in sys.modules: inspect finds a class's source there).
    A bench puts bench/ on sys.path to import its siblings; that is undone after, or a later test's
    package named like a bench (tests/windowing, bench/windowing.py) would resolve to the bench."""
    mod_name = f"bench_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
    return module


@pytest.fixture(scope="module")
def wc() -> ModuleType:
    return load_bench("wordcount")


@pytest.fixture(scope="module")
def corpus(wc) -> list[str]:
    return wc.sentences_of(wc.load_example(), 300)


def test_equal_counts_have_no_errors(wc, corpus):
    expected = wc.expected_counts(corpus)
    assert wc.count_errors(expected, dict(expected)) == []


def test_a_wrong_count_is_named_with_both_values(wc, corpus):
    expected = wc.expected_counts(corpus)
    word = sorted(expected)[0]
    got = dict(expected)
    got[word] += 1
    errors = wc.count_errors(expected, got)
    assert errors and f"{word!r}: {expected[word] + 1} (expected {expected[word]})" in errors[0]


def test_a_missing_and_an_extra_word_are_errors(wc, corpus):
    expected = wc.expected_counts(corpus)
    word = sorted(expected)[-1]
    got = {w: n for w, n in expected.items() if w != word}
    assert any("missing" in e and repr(word) in e for e in wc.count_errors(expected, got))
    got = {**expected, "not-a-word": 1}
    assert any("not in the corpus" in e and "'not-a-word'" in e for e in wc.count_errors(expected, got))
    assert wc.count_errors(expected, None) == ["no counts at all"]


def test_one_wrong_system_makes_the_exit_status_nonzero(wc, corpus, capsys):
    expected = wc.expected_counts(corpus)
    wrong = dict(expected)
    wrong[sorted(expected)[0]] -= 1
    errors = {"squall_local": wc.count_errors(expected, dict(expected)),
              "bytewax": wc.count_errors(expected, wrong), "plain_pyspark_rdd": None}
    verdict = wc.counts_verdict(errors)
    assert verdict == {"squall_local": True, "bytewax": False, "plain_pyspark_rdd": None}
    assert wc.exit_status(verdict) == 1
    assert "WRONG COUNTS from bytewax" in capsys.readouterr().err
    assert wc.exit_status({"squall_local": True, "plain_pyspark_rdd": None}) == 0


def test_final_counts_take_each_words_largest_running_count(wc):
    assert wc.final_counts([["a", 1], ["b", 1], ["a", 2], ["b", 2], ["a", 3]]) == {"a": 3, "b": 2}


def test_squall_counts_on_the_local_engine_match_the_corpus_and_a_wrong_corpus_does_not(wc, corpus):
    got = wc.squall_counts(wc.load_example(), "local", None, 2, corpus)
    assert wc.count_errors(wc.expected_counts(corpus), got) == []
    assert wc.count_errors(wc.expected_counts(corpus[1:]), got) != []


def test_bytewax_counts_on_two_workers_match_the_corpus(wc, corpus):
    pytest.importorskip("bytewax")
    one_pass = wc.bytewax_word_count(corpus, workers=2, batch=7)
    assert Counter(one_pass()) == wc.expected_counts(corpus)


def test_driver_memory_charges_the_msg_ids_to_the_spout_and_the_rest_to_squall_files():
    acker = load_bench("acker")
    traced = acker.bench_driver_traced(5000, warmup=200)
    # The spout keeps nothing; what it made and squall keeps is one msg id int per pending tree
    # (allocated in 8-byte steps), not the values list too (over 60 bytes more).
    assert abs(traced["spout_bytes_per_tree"] - sys.getsizeof(10**6)) <= 8, traced
    assert traced["bytes_per_tree"] > 0
    # (fixed-size allocations made through numpy's own Python code, spread over 5000 trees, are
    # charged to "other": a few bytes per tree at most)
    files = {k for k, v in traced["by_file"].items() if v > 4}
    assert files and all(f.startswith("squall/") for f in files), traced["by_file"]


def test_attribution_names_squall_files_the_spout_and_the_rest():
    acker = load_bench("acker")
    who = acker.Attribution()
    ledger_file = sys.modules["squall.reliability.ledger"].__file__
    assert who.owner(ledger_file, 1) == "squall/reliability/ledger.py"
    code = acker.NumberSpout.next_tuple.__code__
    assert who.owner(code.co_filename, code.co_firstlineno + 1) == "spout"
    assert who.owner(code.co_filename, acker.main.__code__.co_firstlineno) == "bench"
    assert who.owner(Counter.__init__.__code__.co_filename, 1) == "other"


def test_issue_9_goals_say_which_figures_meet_their_goal_and_which_were_not_measured(wc):
    got = wc.goal_verdicts({"bolt_tuples_per_sec_acking": 599_999, "acking_cost_ratio": 1.10,
                            "steady_rate_latency_p99_ms": None, "squall_over_bytewax": 0.8}, wc.ISSUE_9_GOALS)
    assert got["bolt_tuples_per_sec_acking"] == {"value": 599_999, "goal": ">= 600000", "met": False}
    assert got["acking_cost_ratio"]["met"] is True and got["squall_over_bytewax"]["met"] is True
    assert got["steady_rate_latency_p99_ms"]["met"] is None and got["plain_rdd_over_squall"]["met"] is None


def test_issue_50_goals_judge_the_seed_forms_figures_and_skip_a_latency_at_another_rate(wc):
    out = {"bolt_tuples_per_sec_acking": 1_300_000, "bolt_tuples_per_sec_acking_median": 1_190_000,
           "acking_cost_ratio": 1.08, "plain_rdd_over_squall": 2.38, "steady_rate_latency_p99_ms": 2.5}
    got = wc.goal_verdicts(out, wc.ISSUE_50_GOALS)
    assert got["bolt_tuples_per_sec_acking_median"] == {"value": 1_190_000, "goal": ">= 1200000", "met": False}
    assert got["acking_cost_ratio"]["met"] is True and got["plain_rdd_over_squall"]["met"] is False
    assert got["steady_rate_latency_p99_ms"] == {"value": 2.5, "goal": "<= 15", "met": True}
    skipped = wc.goal_verdicts(out, wc.ISSUE_50_GOALS, ("steady_rate_latency_p99_ms",))
    assert skipped["steady_rate_latency_p99_ms"]["met"] is None


def test_the_acking_cost_is_the_median_of_the_pairs_ratios(wc):
    got = wc.pair_fields([({"bolt_tuples_per_sec": 100.0}, {"bolt_tuples_per_sec": 120.0}),
                          ({"bolt_tuples_per_sec": 90.0}, {"bolt_tuples_per_sec": 90.0}),
                          ({"bolt_tuples_per_sec": 80.0}, {"bolt_tuples_per_sec": 120.0})])
    assert got["acking_cost_ratio_pairs"] == [1.2, 1.0, 1.5] and got["acking_cost_ratio"] == 1.2
    assert got["acking_cost_ratio_first_pair"] == 1.2
    assert got["bolt_tuples_per_sec_acking_median"] == 90  # what Bytewax and plain PySpark are compared with
    assert got["pair_rates"] == [[100, 120], [90, 90], [80, 120]]


def test_the_wave_cost_model_splits_a_waves_cpu_into_fixed_and_per_sentence(wc):
    """A fixed 40 ms a wave and 10 us a sentence: waves of 25,000 and 100,000 sentences cost
    0.0116 and 0.0104 ms a sentence, a ratio of 1.115, with no cost of acking in it."""
    tiny = {"cpu_cores": {"driver": 0.2, "jvm": 1.0, "python_workers": 0.4}, "waves_per_sec": 40.0,
            "sentences_per_wave": 200}  # 5 + 25 + 10 = 40 ms a wave
    acking = {"cpu_cores": {"jvm": 0.68, "python_workers": 1.32}, "waves_per_sec": 2 / 0.29,
              "sentences_per_wave": 25_000}  # 290 ms a wave: 40 + 25,000 x 10 us
    no_acking = {"cpu_cores": {"jvm": 0.4, "python_workers": 1.5}, "waves_per_sec": 1.9 / 1.04,
                 "sentences_per_wave": 100_000}  # 1,040 ms a wave
    same_size = {**no_acking, "cpu_cores": {"jvm": 0.68, "python_workers": 1.32}, "waves_per_sec": 2 / 0.29,
                 "sentences_per_wave": 25_000}  # a second pair: the sizer gave the no-acker case 25,000 too
    got = wc.wave_cost_fields([(acking, no_acking), (acking, same_size), (acking, no_acking)], tiny)
    assert got["wave_fixed_cpu_ms"] == {"driver": 5.0, "jvm": 25.0, "python_workers": 10.0, "total": 40.0}
    assert got["sentence_cpu_us_acking"] == 10.0 and got["sentence_cpu_us_no_acking"] == 10.0
    assert got["acking_cost_ratio_from_wave_sizes_pairs"] == [1.115, 1.0, 1.115]
    assert got["acking_cost_ratio_from_wave_sizes"] == 1.115
    tiny["cpu_cores"] = None  # off Linux: nothing to say, no error
    assert wc.wave_cost_fields([(acking, no_acking)], tiny)["acking_cost_ratio_from_wave_sizes"] is None


def test_proc_cpu_charges_a_child_process_and_kinds_by_command_line():
    """bench/proc_cpu.py: a child that has done 20M loop turns shows its CPU under "other", and
    the kinds follow the command line (the JVM is java, PySpark's workers run pyspark.daemon)."""
    import subprocess

    proc_cpu = load_bench("proc_cpu")
    child = subprocess.Popen([sys.executable, "-c", "n = 0\nwhile n < 20_000_000: n += 1\nprint('done', flush=True)\n"
                              "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"done\n"
        cpu = proc_cpu.tree_cpu()
        assert cpu["other"] > 0.1 and cpu["driver"] > 0, cpu
    finally:
        child.stdin.close()
        child.wait(10)
    assert proc_cpu._kind(7, 7, "python bench.py") == "driver"
    assert proc_cpu._kind(8, 7, "/usr/bin/java\0-cp\0...") == "jvm"
    assert proc_cpu._kind(9, 7, "python\0-m\0pyspark.daemon") == "python_workers"
    assert proc_cpu.cores({"jvm": 1.0}, {"jvm": 3.0}, 4.0) == {"jvm": 0.5}
    assert proc_cpu.cores(None, {"jvm": 1.0}, 1.0) is None


def test_a_wider_vocabulary_keeps_each_sentence_and_reaches_about_that_many_words(wc, corpus):
    wide = wc.widen_vocabulary(corpus, 1000, 50)
    assert [len(s.split()) for s in wide] == [len(s.split()) for s in corpus]  # the same work a sentence
    assert all(w.startswith(b) for s, t in zip(corpus, wide) for b, w in zip(s.split(), t.split()))
    words = {w for s in wide for w in s.split()}
    assert 800 <= len(words) <= 1000  # 300 sentences of ~8 words: most of the 50 x 20 reached
    assert wc.widen_vocabulary(corpus, 1000, 50) == wide  # crc32 of the place: the same every run
    assert wc.widen_vocabulary(corpus, 50, 50) == corpus


def test_each_idiom_is_judged_against_its_fastest_equivalent():
    idioms = load_bench("idioms")
    rates = {"list_anchor": 890, "tuple_anchor": 900, "named_stream": 950, "basic": 1000, "multi_anchor": 800,
             "spout_rows": 1100, "no_ackers": 999}
    got = idioms.goal_verdicts({f: {"bolt_tuples_per_sec": r} for f, r in rates.items()})
    assert got["list_anchor_over_basic"] == {"value": 0.89, "goal": ">= 0.9", "met": False}
    assert got["tuple_anchor_over_basic"]["met"] is True and got["named_stream_over_basic"]["met"] is True
    assert got["multi_anchor_over_basic"]["value"] == 0.8
    assert got["basic_over_spout_rows"] == {"value": 0.909, "goal": ">= 0.9", "met": True}
    assert got["no_ackers_over_basic"] == {"value": 0.999, "goal": ">= 1", "met": False}  # 0 ackers never slower


def test_brokers_judge_best_and_tuple_spouts_and_the_ceiling_over_each_raw_client():
    brokers = load_bench("brokers")
    out = {"redis": {"raw_msgs_per_sec": 200_000, "ratio": 1.6, "columns": {"ratio": 3.5}},
           "kafka": {"raw_msgs_per_sec": 400_000, "ratio": 0.41, "columns": {"ratio": 1.76}},
           "nats": {"error": "ConnectionRefusedError"},  # unreachable: judged on the others
           "engine_ceiling": {"squall_msgs_per_sec": 300_000}}
    got = brokers.verdicts(out)
    assert got["best_ratios"] == {"redis": 3.5, "kafka": 1.76} and got["goal_met"] is True
    assert got["tuple_ratios"] == {"redis": 1.6, "kafka": 0.41} and got["tuple_goal_met"] is False
    assert got["ceiling_over_raw"] == {"redis": 1.5, "kafka": 0.75}
    assert brokers.verdicts({**out, "engine_ceiling": {"error": "TimeoutError"}})["ceiling_over_raw"] == {}


def test_instructions_are_the_difference_of_two_callgrind_runs():
    bench = load_bench("instructions")
    assert bench.collected("==123== Events    : Ir\n==123== Collected : 1419797192\n==123==\n") == 1419797192
    with pytest.raises(RuntimeError, match="no instruction count"):
        bench.collected("valgrind: command not found")
    got = bench.per_tuple((1_000_000, 1_000), (16_000_000, 2_000), 100)
    assert got == {"instructions_per_bolt_tuple": 15_000, "instructions_per_sentence": 150_000,
                   "bolt_tuples": 1_000, "instructions": 15_000_000}
