"""The seeded trace fuzzer: 1,000 variants of real and synthetic traces, zero crashes, zero wrong results."""

from __future__ import annotations

import collections

import pytest

from tests.support import fuzz, fuzz_judge
from tests.support.fuzz import FAMILIES, default_bases, variant, variants
from tests.support.fuzz_judge import judge, judge_cli, report_problems

SUITE_VARIANTS = 1_000
BROKEN = ("truncated_gzip", "truncated_json", "nan_inf")  # always a clean error
ODD_BUT_VALID = ("dangling_flows", "profiler_steps", "zero_duration_gpu")  # always loads


@pytest.fixture(scope="module")
def bases():
    return default_bases()


def analyzed(index: int) -> bool:
    """A sixth of each family is analyzed too (``analyze`` costs 0.1-0.4 s a trace); all are loaded.
    ``benchmarks/fuzz_traces.py`` analyzes every loaded variant of 10,000."""
    return (index // len(FAMILIES)) % 6 == 0


def drawn(index: int) -> bool:
    """The dashboard figures (about 1 s a trace) of the analyzed zero-duration GPU variants: the
    dashboard-only crash of issue 11."""
    return analyzed(index) and FAMILIES[index % len(FAMILIES)] == "zero_duration_gpu"


def test_bases_are_small_real_and_synthetic_traces(bases):
    names = [b.name for b in bases]
    assert "cpu_stages.pt.trace.json.gz" in names and "example-2021" in names
    assert all(0 < len(b.doc["traceEvents"]) <= 2_000 for b in bases)


def test_variants_are_seeded_and_rebuildable_one_by_one(bases):
    first = list(variants(bases, 40, seed=7))
    assert [v.data for v in first] == [variant(bases, i, seed=7).data for i in range(40)]
    assert [v.family for v in first[: len(FAMILIES)]] == list(FAMILIES)
    assert variant(bases, 3, seed=8).data != variant(bases, 3, seed=7).data


def test_a_thousand_variants_give_no_crash_and_no_wrong_result(bases, tmp_path):
    verdicts = [
        judge(v, tmp_path, analyze=analyzed(v.index), figures=drawn(v.index))
        for v in variants(bases, SUITE_VARIANTS, seed=0)
    ]
    table = collections.Counter((v.family, v.outcome) for v in verdicts)
    bad = [
        (i, v.family, v.outcome, v.detail)
        for i, v in enumerate(verdicts)
        if v.outcome in ("crash", "wrong_result")
    ]
    assert bad == []
    per_family = SUITE_VARIANTS // len(FAMILIES)
    for family in BROKEN:
        assert table[family, "clean_error"] >= per_family
    for family in ODD_BUT_VALID:
        assert table[family, "loaded"] >= per_family
    assert sum(table[f, "loaded"] for f in FAMILIES) > 200  # the fuzzer does not only make garbage


@pytest.mark.parametrize(
    "index, outcome",
    [
        (9 + 18 * 2, "clean_error"),  # deep nesting
        (15, "loaded"),  # zero-duration GPU work
        (14 + 18, "loaded"),  # odd ProfilerStep numbers
        (11, "clean_error"),
    ],
)  # invalid UTF-8
def test_a_sample_through_the_command_line_exits_0_or_2(bases, tmp_path, index, outcome):
    v = variant(bases, index, seed=0)
    verdict = judge_cli(v, tmp_path)
    assert (verdict.family, verdict.outcome) == (FAMILIES[index % len(FAMILIES)], outcome), (
        verdict.detail
    )


def test_judge_calls_an_unexpected_exception_a_crash(bases, tmp_path, monkeypatch):
    def broken(path, **kw):
        raise IndexError("single positional indexer is out-of-bounds")

    monkeypatch.setattr(fuzz_judge, "load_trace", broken)
    verdict = judge(variant(bases, 15, seed=0), tmp_path)
    assert verdict == fuzz_judge.Verdict(
        "zero_duration_gpu", "crash", "IndexError: single positional indexer is out-of-bounds"
    )


def sound_report() -> dict:
    return {
        "gpu": {
            "span_us": 10.0,
            "busy_us": 4.0,
            "idle_us": 6.0,
            "idle_fraction": 0.6,
            "streams": [
                {"idle_us": 6.0, "host_wait_us": 1.0, "kernel_wait_us": 2.0, "other_us": 3.0}
            ],
        },
        "kernels": {"count": 2, "total_us": 5.0, "busy_us": 4.0},
        "memcpy": {"count": 0, "total_us": 0.0},
        "memset": {"count": 0, "total_us": 0.0},
        "launches": {"count": 2, "total_us": 1.0},
        "steps": [
            {
                "dur_us": 10.0,
                "kernel_count": 2,
                "kernel_us": 5.0,
                "memcpy_us": 0.0,
                "memset_us": 0.0,
            }
        ],
        "step_breakdown": [
            {
                "kernel_us": 4.0,
                "memcpy_us": 0.0,
                "memset_us": 0.0,
                "communication_us": 0.0,
                "runtime_us": 1.0,
                "dataloader_us": 0.0,
                "cpu_exec_us": 2.0,
                "other_us": 3.0,
                "total_us": 10.0,
            }
        ],
        "stages": [],
    }


@pytest.mark.parametrize(
    "path, value, problem",
    [
        (("gpu", "busy_us"), 11.0, "gpu busy 11.0 us > span 10.0 us"),
        (("gpu", "idle_fraction"), 1.5, "gpu idle fraction 1.5 outside [0, 1]"),
        (("gpu", "span_us"), float("nan"), "NaN or Infinity in the JSON report"),
        (("kernels", "total_us"), -1.0, "kernels total_us = -1.0 < 0"),
        (("step_breakdown", 0, "other_us"), 4.0, "step parts sum to 11.0 us, not total_us 10.0 us"),
        (
            ("gpu", "streams", 0, "other_us"),
            0.0,
            "stream idle parts sum to 3.0 us, not idle_us 6.0 us",
        ),
    ],
)
def test_report_problems_finds_each_broken_invariant(path, value, problem):
    report = sound_report()
    assert report_problems(report) == []
    target = report
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert report_problems(report)[0] == problem


def test_fuzz_module_keeps_its_families_in_one_place():
    assert set(fuzz.MUTATORS) == set(FAMILIES) and len(FAMILIES) == 18
