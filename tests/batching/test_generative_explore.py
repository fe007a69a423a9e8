"""The generative explorer's tables: live continuous runs read, their step models simulated, to the ns."""

from pathlib import Path

import pytest

from tests.support.continuous_runs import (
    ALONE_ITL_NS,
    ALONE_TTFT_NS,
    ANSWER,
    POLICY,
    PROMPT,
    TIMES,
    continuous_run,
)
from workbench.batching.arrivals import Arrivals
from workbench.errors import ConfigError
from workbench.batching.continuous import (
    POINT_COLUMNS,
    Setup,
    measured_points,
    recorded_setup,
    simulated_curve,
)

RUNS = Path(__file__).resolve().parents[2] / "data" / "runs"
# 1000 ns TTFT, 1100 ns TPOT: a lone request meets both
BOUNDS = dict(ttft_ms=0.001, tpot_ms=0.0011)


def test_a_run_at_a_low_rate_measures_a_lone_requests_step_times():
    table = measured_points([continuous_run(1000.0)], **BOUNDS)
    assert list(table.columns) == [*POINT_COLUMNS, "precision", "run", *POLICY.params()]
    row = table.iloc[0].to_dict()
    t = Arrivals("poisson", rate_rps=1000.0, count=40, seed=2).times_ns()
    last_token = t[-1] + ALONE_TTFT_NS + (ANSWER - 1) * ALONE_ITL_NS
    assert row["throughput_rps"] == pytest.approx(40 / ((last_token - t[0]) / 1e9), rel=1e-12)
    assert row["ttft_p99_ms"] == pytest.approx(0.0009, abs=1e-15)
    assert row["itl_p99_ms"] == pytest.approx(0.0011, abs=1e-15)
    assert row["goodput"] == 1.0
    assert (row["rate_rps"], row["precision"], row["max_num_seqs"]) == (1000.0, "fp32", 4)
    assert (row["max_batched_tokens"], row["chunk_tokens"]) == (64, None)


def test_the_setup_of_a_precision_is_its_highest_rate_run(tmp_path):
    runs = [
        continuous_run(1000.0).save(tmp_path / "fp32-r1000"),
        continuous_run(200_000.0).save(tmp_path / "fp32-r200000"),
        continuous_run(1000.0, "bf16").save(tmp_path / "bf16-r1000"),
    ]
    from workbench.record import load_run

    setups = recorded_setup([load_run(p) for p in runs])
    assert list(setups) == ["bf16", "fp32"]
    assert setups["fp32"].run == "fp32-r200000" and setups["bf16"].run == "bf16-r1000"
    assert setups["fp32"].lengths == [(PROMPT, ANSWER)] * 40
    # batched steps tell the decode terms apart; the prefill terms only as a 40-token prompt's sum
    decode_step, decode_seqs, context, chunk, per_token = setups["fp32"].times.coef_ns
    assert (decode_step, decode_seqs, context) == pytest.approx(TIMES.coef_ns[:3], abs=1e-6)
    assert chunk + PROMPT * per_token == pytest.approx(ALONE_TTFT_NS, abs=1e-6)


def test_the_simulated_curve_is_the_live_runs_on_their_arrivals():
    live = [continuous_run(1000.0), continuous_run(200_000.0)]
    measured = measured_points(live, **BOUNDS)
    setup = recorded_setup(live)["fp32"]
    curve = simulated_curve(setup, POLICY, [1000.0, 200_000.0], requests=40, seed=2, **BOUNDS)
    assert curve.to_dict("list") == measured[POINT_COLUMNS].to_dict("list")
    assert curve["goodput"].tolist() == [1.0, 0.425]  # batched steps take longer than a lone one's


def test_the_curve_cycles_the_recorded_lengths_over_its_requests():
    setup = Setup(TIMES, [(PROMPT, 1), (PROMPT, ANSWER)], "two")
    curve = simulated_curve(setup, POLICY, [10.0], requests=5, **BOUNDS)
    # 3 requests of 3 tokens, 2 of 1: the gaps are a lone decode's, TPOT counts 3-token answers only
    assert curve["itl_p99_ms"].tolist() == [pytest.approx(0.0011, abs=1e-15)]
    assert curve["goodput"].tolist() == [1.0]


def test_a_run_that_is_not_a_continuous_load_run_is_named(tmp_path):
    from workbench.record import load_run

    profiled = load_run(RUNS / "generate-cpu-bs1-fp32")
    for table in (recorded_setup, lambda runs: measured_points(runs, **BOUNDS)):
        with pytest.raises(ConfigError, match=r"^generate-cpu-bs1-fp32: not a continuous load run"):
            table([continuous_run(1000.0), profiled])
    with pytest.raises(ConfigError, match="no continuous load runs given"):
        recorded_setup([])
