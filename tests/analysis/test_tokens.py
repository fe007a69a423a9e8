"""Generative metrics (analysis.tokens): TTFT, prefill, ITL, TPOT and decode growth, exact."""

import pandas as pd

from tests.conftest import streaming_pipeline
from workbench import profile
from workbench.analysis.budget import budget
from workbench.analysis.tokens import (
    decode_growth,
    goodput,
    token_requests,
    token_summary,
    unit_gaps,
)


def _run(clock, **kw):
    return profile(streaming_pipeline(clock, **kw), requests=12, warmup=1, traced=0, clock=clock)


def test_ttft_prefill_tpot_and_itl_per_request_exact(fake_clock):
    run = _run(fake_clock, prefill_ns=5_000, step_ns=100, growth_ns=100, tokens=4)
    per = token_requests(run.requests, run.stages, run.units)
    assert list(per["request"]) == list(range(1, 13))  # the warm-up request is left out
    assert set(per["ttft_ns"]) == {6_000}  # tokenize 1,000 + prefill 5,000
    assert set(per["prefill_ns"]) == {5_000}
    assert set(per["tpot_ns"]) == {300}  # (200 + 300 + 400) / 3
    assert set(per["tokens_out"]) == {4} and set(per["end_to_end_ns"]) == {7_200}
    gaps = unit_gaps(run.requests, run.units)
    assert list(gaps["position"][:3]) == [1, 2, 3] and list(gaps["itl_ns"][:3]) == [200, 300, 400]
    assert len(gaps) == 36


def test_summary_counts_requests_and_tokens_with_intervals(fake_clock):
    s = token_summary(*(lambda r: (r.requests, r.stages, r.units))(_run(fake_clock, tokens=4)))
    assert (s["stage"], s["requests"], s["tokens"]) == ("generate", 12, 48)
    assert s["tokens_out"] == {"mean": 4.0, "p50": 4.0, "max": 4}
    assert s["ttft"]["count"] == 12 and s["ttft"]["p50_ms"] == 0.006
    assert s["itl"]["count"] == 36 and s["itl"]["p50_ms"] == 0.001
    assert s["itl"]["p50_ci_ms"] == [0.001, 0.001] and s["itl"]["p99_ci_ms"][1] is None
    assert s["tpot"]["count"] == 12 and s["tpot"]["p99_ms"] == 0.001


def test_single_token_answers_have_a_ttft_but_no_tpot(fake_clock):
    run = _run(fake_clock, tokens=1)
    per = token_requests(run.requests, run.stages, run.units)
    assert per["tpot_ns"].isna().all() and set(per["tokens_out"]) == {1}
    s = token_summary(run.requests, run.stages, run.units)
    assert s["tpot"]["count"] == 0 and s["itl"]["count"] == 0 and s["ttft"]["count"] == 12


def test_decode_steps_that_grow_with_position_are_found_and_flat_ones_are_not(fake_clock):
    grown = _run(fake_clock, step_ns=1_000, growth_ns=200, tokens=8)
    g = decode_growth(unit_gaps(grown.requests, grown.units))
    # steps 1,200 .. 2,400 ns: later half (2,000 + 2,200 + 2,400) / earlier (1,200 + 1,400 + 1,600)
    assert g["grows"] is True and g["requests"] == 12 and g["agree"] == 1.0
    assert round(g["growth"], 6) == round(6_600 / 4_200, 6)
    assert round(g["slope_us_per_token"], 6) == 0.2 and (g["first"], g["last"]) == (1, 7)
    assert round(g["first_ms"], 9) == 0.0012 and round(g["last_ms"], 9) == 0.0024
    flat = _run(fake_clock, step_ns=1_000, growth_ns=0, tokens=8)
    f = decode_growth(unit_gaps(flat.requests, flat.units))
    assert f["grows"] is False and f["growth"] == 1.0 and round(f["slope_us_per_token"], 9) == 0


def test_too_few_requests_leave_growth_undecided():
    gaps = pd.DataFrame(
        {"request": [0] * 4, "position": [1, 2, 3, 4], "itl_ns": [100, 200, 300, 400]}
    )
    assert decode_growth(gaps)["grows"] is None


def test_budget_of_a_streaming_run_has_tokens_and_others_do_not(fake_clock):
    run = _run(fake_clock, tokens=3)
    assert budget(run)["tokens"]["tokens"] == 36
    run.units = None
    assert "tokens" not in budget(run)


def test_without_the_streaming_stage_s_rows_prefill_is_null_and_the_rest_stands(fake_clock):
    run = _run(fake_clock, prefill_ns=5_000, tokens=4)  # a served run against a server without
    stages = run.stages[run.stages["stage"] != "generate"]  # Server-Timing has no stage rows
    per = token_requests(run.requests, stages, run.units)
    assert per["prefill_ns"].isna().all() and set(per["ttft_ns"]) == {6_000}
    s = token_summary(run.requests, stages, run.units)
    assert s["prefill"]["count"] == 0 and s["ttft"]["count"] == 12 and s["tpot"]["count"] == 12


def test_goodput_is_the_share_of_measured_requests_within_both_bounds(fake_clock):
    run = _run(fake_clock, prefill_ns=5_000, step_ns=100, growth_ns=100, tokens=4)
    tables = run.requests, run.stages, run.units  # every TTFT 6,000 ns, every TPOT 300 ns
    assert goodput(*tables, None, None) is None
    assert goodput(*tables, 0.006, 0.0003)["good"] == 12  # bounds inclusive
    assert goodput(*tables, 0.006, 0.0002) == {
        "ttft_ms": 0.006,
        "tpot_ms": 0.0002,
        "requests": 12,
        "good": 0,
        "share": 0.0,
    }
    failed = run.requests.assign(ok=run.requests["request"] != 3)  # a failed request is not good
    assert goodput(failed, run.stages, run.units, 0.006, None)["share"] == 11 / 12
