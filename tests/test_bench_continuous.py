"""benchmarks/bench_continuous.py's verdict: pooled rounds per rate, interleaved rate orders."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import load_script
from tests.support.continuous_runs import ALONE_ITL_NS, ALONE_TTFT_NS, ANSWER, continuous_run

MS = 1_000_000


@pytest.fixture(scope="module")
def bench():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_continuous.py"
    return load_script(path, "bench_continuous_under_test")


def sample(bench, ttft_ms, itl_ms, tpot_ms=None):
    """A Sample of requests with these TTFTs (and TPOTs, default 1 ms) and gaps with these ITLs."""
    n = len(ttft_ms)
    per = pd.DataFrame(
        {
            "request": range(n),
            "ttft_ns": [round(t * MS) for t in ttft_ms],
            "tpot_ns": pd.array([round(t * MS) for t in tpot_ms or [1] * n], dtype="Int64"),
        }
    )
    gaps = pd.DataFrame({"request": 0, "position": 1, "itl_ns": [round(t * MS) for t in itl_ms]})
    return bench.Sample(per, gaps)


def test_figures_pool_every_request_and_gap_of_the_rounds(bench):
    one = sample(bench, range(1, 101), [1, 1, 1])
    two = sample(bench, range(101, 201), [3])
    # 1..200 ms pooled: p50 at rank 100.5, p99 at 1 + 0.99 x 199 = 198.01; gaps 1, 1, 1, 3
    assert bench.figures([one, two]) == {
        "ttft_p50_ms": pytest.approx(100.5),
        "ttft_p99_ms": pytest.approx(198.01),
        "itl_p50_ms": pytest.approx(1.0),
        "itl_p99_ms": pytest.approx(2.94),
        "requests": 200,
        "gaps": 4,
    }
    assert bench.figures([one])["ttft_p99_ms"] == pytest.approx(99.01)


def test_sample_of_a_run_is_its_tokens_frames(bench):
    alone = bench.figures([bench.sample_of(continuous_run(1.0, count=10))])
    assert alone == {
        "ttft_p50_ms": ALONE_TTFT_NS / MS,
        "ttft_p99_ms": ALONE_TTFT_NS / MS,
        "itl_p50_ms": ALONE_ITL_NS / MS,
        "itl_p99_ms": ALONE_ITL_NS / MS,
        "requests": 10,
        "gaps": 10 * (ANSWER - 1),
    }


def test_compare_is_within_at_15_percent_for_p50_and_25_for_p99(bench):
    live = {"ttft_p50_ms": 10.0, "ttft_p99_ms": 10.0, "itl_p50_ms": 10.0, "itl_p99_ms": 0.0}
    sim = {"ttft_p50_ms": 11.6, "ttft_p99_ms": 7.6, "itl_p50_ms": None, "itl_p99_ms": 1.0}
    got = bench.compare(sim, live)
    assert got["ttft_p50_ms"] == {"ratio": pytest.approx(1.16), "within": False}
    assert got["ttft_p99_ms"] == {"ratio": pytest.approx(0.76), "within": True}
    assert got["itl_p50_ms"] == {"ratio": None, "within": False}
    assert got["itl_p99_ms"] == {"ratio": None, "within": False}


def test_rounds_alternate_the_rate_order(bench):
    assert bench.round_orders(3, 4) == [[0, 1, 2], [2, 1, 0], [0, 1, 2], [2, 1, 0]]
    assert bench.round_orders(3, 1) == [[0, 1, 2]]


def test_pooled_row_judges_the_pooled_sample_and_keeps_the_rounds_spread(bench):
    # live rounds: TTFTs 1..100 and 101..200 ms; sim: each round's TTFTs x 0.9 and x 1.2
    live = [sample(bench, range(1, 101), [1]), sample(bench, range(101, 201), [1])]
    sim = [
        sample(bench, [0.9 * t for t in range(1, 101)], [1]),
        sample(bench, [1.2 * t for t in range(101, 201)], [1], tpot_ms=[20] * 100),
    ]
    samples = {"live": live, "sim": sim, "one_rate": live, "alone": sim, "replay": live}
    rounds = [
        {"check": bench.compare(bench.figures([s]), bench.figures([lv]))}
        for s, lv in zip(sim, live)
    ]
    row = bench.pooled_row(0.3, 60.0, samples, rounds, (150.0, 10.0))
    assert row["rounds"] == 2 and row["live"]["requests"] == 200
    # pooled sim: 0.9..90 and 121.2..240; p50 between 90 and 121.2 (ranks 100, 101)
    assert row["sim"]["ttft_p50_ms"] == pytest.approx((90 + 121.2) / 2)
    assert row["check"]["ttft_p50_ms"]["ratio"] == pytest.approx(105.6 / 100.5)
    assert row["check"]["ttft_p50_ms"]["within"] is True
    assert row["spread"]["ttft_p50_ms"] == [pytest.approx(0.9), pytest.approx(1.2)]
    assert row["one_rate_check"]["ttft_p99_ms"] == {"ratio": 1.0, "within": True}
    assert row["alone_check"] == row["check"]
    # goodput: live 150 of 200 at TTFT <= 150 ms; sim round 1 all 100, round 2 none (TPOT 20 ms)
    assert row["goodput_live"] == 0.75
    assert row["goodput_sim"] == 0.5


def test_markdown_has_the_pooled_table_then_the_rounds(bench):
    live = [sample(bench, [1, 2], [1]), sample(bench, [3, 4], [1])]
    samples = dict.fromkeys(("live", *bench.MODELS), live)
    rounds = [
        {"round": r, "load": 0.3, "rate_rps": 60.0, "failed_live": 0, "loadavg_1min": 0.5}
        | {"goodput_live": 1.0, "goodput_sim": 1.0}
        | bench.judged(dict.fromkeys(samples, [s]))
        for r, s in enumerate(live)
    ]
    pooled = bench.pooled_row(0.3, 60.0, samples, rounds, (50.0, 10.0))
    step = {"decode_step_ns": 1.0}
    text = bench.markdown(
        {
            "policy": {},
            "options": {},
            "device": "cpu",
            "threads": 1,
            "repeats": 2,
            "step_model": step,
            "step_model_alone": step,
            "calibration_rps": 100.0,
            "capacity_rps": 200.0,
            "note": "",
            "pooled": [pooled],
            "rates": rounds,
            "knee": {"target": 0.9, "last_good_rps": 1.0, "first_short_rps": None}
            | {"ttft_ms": 50.0, "tpot_ms": 10.0},
            "holds": True,
        }
    )
    lines = text.splitlines()
    assert (
        "| 0.30 | 60.0 | ttft_p50 | 2.500 | 2.500 | 1.000 | yes | 1.000..1.000 | 1.000 | 1.000 "
        "| 1.000 |" in lines
    )
    assert (
        "| 1 | 0.30 | 60.0 | itl_p99 | 1.000 | 1.000 | 1.000 | yes | 1.000 | 1.000 | 1.000 |"
        in (lines)
    )
    assert lines.index("Per round (in the order run)") > lines.index(
        "| 0.30 | 60.0 | ttft_p50 | 2.500 | 2.500 | 1.000 | yes | 1.000..1.000 | 1.000 | 1.000 "
        "| 1.000 |"
    )
    assert lines[-1] == "check holds at all three rates (pooled, 2 rounds)"
