import math
import warnings

import numpy as np
import pandas as pd
import pytest

from workbench.analysis.verdicts import (
    _percentile_rows,
    FASTER,
    INCONCLUSIVE,
    NO_DIFFERENCE,
    NO_REGRESSION,
    REGRESSION,
    SLOWER,
    TOO_NOISY,
    VerdictOptions,
    band_p_value,
    compare_blocks,
    consecutive_blocks,
    gate_decision,
    holm_intervals,
    paired_comparison,
    point_ratio,
    resolution,
    round_blocks,
    separate_comparison,
    verdict,
)
from workbench.errors import ConfigError


def test_round_blocks_groups_by_round_and_pads_with_nan():
    m = round_blocks([5, 1, 2, 7, 3], [1, 0, 0, 1, 2])
    assert m.shape == (3, 2)
    assert m[0].tolist() == [1.0, 2.0] and m[1].tolist() == [5.0, 7.0]
    assert m[2][0] == 3.0 and math.isnan(m[2][1])
    assert consecutive_blocks([1, 2, 3], block=2)[0].tolist() == [1.0, 2.0]


def test_point_ratio_is_percentile_of_b_over_percentile_of_a():
    a = np.array([[1.0, 2.0], [3.0, np.nan]])
    b = np.array([[2.0, 4.0], [6.0, 8.0]])
    assert point_ratio(a, b, 50) == 5.0 / 2.0
    assert math.isnan(point_ratio(np.zeros((1, 2)), b, 50))


def test_band_p_value_counts_resamples_on_the_wrong_side_of_the_band():
    # 9 of 99 resampled ratios at 1.0 (inside the band), 90 at 1.5: p = 2 * (9 + 1) / 100
    r = np.array([1.0] * 9 + [1.5] * 90)
    assert band_p_value(r, 0.02) == pytest.approx(0.2)
    assert band_p_value(np.array([1.0] * 99), 0.02) == 1.0
    assert band_p_value(np.array([np.nan]), 0.02) == 1.0


def test_holm_stops_at_the_first_ratio_it_cannot_reject():
    # p-values 2*30/2000 = 0.03 and 2*40/2000 = 0.04. Unadjusted, "b" would be slower at 95 %;
    # Holm tests "a" at 0.05/2 = 0.025, cannot reject it and stops, so neither is slower.
    a = np.array([1.0] * 29 + [1.1] * 1970)
    b = np.array([1.0] * 39 + [1.1] * 1960)
    holm = holm_intervals({"a": a, "b": b}, min_effect=0.02)
    assert holm["a"]["p_value"] == pytest.approx(0.03) and holm["b"]["p_value"] == pytest.approx(
        0.04
    )
    assert not holm["a"]["rejected"] and not holm["b"]["rejected"]
    assert holm["a"]["level"] == holm["b"]["level"] == pytest.approx(0.975)
    assert holm["b"]["ci"] == (1.0, 1.1)
    unadjusted_lo = np.quantile(b, 0.025)
    assert verdict((unadjusted_lo, 1.1)) == SLOWER  # what an uncorrected 95 % interval would claim
    assert verdict(holm["b"]["ci"], rejected=holm["b"]["rejected"]) == NO_DIFFERENCE


def test_holm_levels_step_down_with_rank():
    clear = np.full(1999, 1.2)  # p = 2/2000
    holm = holm_intervals({"x": clear, "y": clear * 0.5, "z": np.full(1999, 1.0)}, min_effect=0.02)
    assert holm["x"]["rejected"] and holm["y"]["rejected"] and not holm["z"]["rejected"]
    assert holm["x"]["level"] == pytest.approx(1 - 0.05 / 3)
    assert holm["y"]["level"] == pytest.approx(1 - 0.05 / 2)
    assert holm["z"]["level"] == pytest.approx(0.95)
    assert holm["y"]["ci"] == (0.6, 0.6)


@pytest.mark.parametrize(
    "ci, kwargs, expected",
    [
        ((1.05, 1.10), {}, SLOWER),
        ((0.90, 0.97), {}, FASTER),
        ((0.99, 1.05), {}, NO_DIFFERENCE),
        ((1.05, 1.10), {"noisy": True}, SLOWER),  # noise widens the margin by the drift (0 here)
        (
            (1.05, 1.10),
            {"noisy": True, "drift": 0.06},
            TOO_NOISY,
        ),  # ... which the interval does not clear
        (
            (1.27, 1.56),
            {"noisy": True, "drift": 0.06},
            SLOWER,
        ),  # issue 26: a 30 % slower stage, noisy machine
        (
            (4.03, 5.52),
            {"noisy": True, "drift": 0.1},
            SLOWER,
        ),  # issue 26: bf16 x4.73, wide but resolved
        ((0.70, 0.85), {"noisy": True, "drift": 0.1}, FASTER),
        ((0.98, 1.03), {"noisy": True, "drift": 0.05}, NO_DIFFERENCE),  # inside 1 +- drift
        ((0.98, 1.03), {"noisy": True, "drift": 0.02}, TOO_NOISY),  # reaches past 1 + drift
        ((1.05, 1.10), {"noisy": True, "drift": math.nan}, TOO_NOISY),  # drift not measured
        ((1.05, 1.31), {}, SLOWER),  # wide, but above 1 + 2 %
        ((0.95, 1.21), {}, TOO_NOISY),  # wider than 25 % and not resolved
        ((1.05, 1.10), {"rejected": False}, NO_DIFFERENCE),  # Holm did not reject it
        ((1.01, 1.10), {}, NO_DIFFERENCE),  # not above 1 + 2 %
        ((1.01, 1.10), {"min_effect": 0.0}, SLOWER),
        ((math.nan, 1.0), {}, TOO_NOISY),
    ],
)
def test_verdict_rules_first_match_wins(ci, kwargs, expected):
    assert verdict(ci, **kwargs) == expected


def interleaved_samples(load: list[float], b_forward: float) -> pd.DataFrame:
    """Per round a load factor shared by both sides; B's forward is b_forward x A's in every request."""
    rows = []
    for rnd, f in enumerate(load):
        for config in (0, 1):
            for k in range(10):
                parse = int(1_000_000 * f * (1 + k / 100))
                forward = int(4_000_000 * f * (1 + k / 50) * (b_forward if config else 1.0))
                rows.append(
                    {
                        "config": config,
                        "round": rnd,
                        "ok": True,
                        "parse": parse,
                        "forward": forward,
                        "end_to_end": parse + forward,
                    }
                )
    return pd.DataFrame(rows)


def test_paired_by_round_the_shared_load_cancels_out():
    # Rounds differ threefold in load; B's forward is exactly 1.25 x A's in each round. Paired resampling
    # keeps the rounds together, so every resampled ratio is 1.25: a zero-width interval.
    samples = interleaved_samples([1.0, 3.0, 1.5, 2.0, 1.0, 2.5], 1.25)
    found = paired_comparison(samples, ["parse", "forward"], resamples=200)
    parse, forward = found["stages"]
    assert (
        forward["p50_ratio"] == 1.25
        and forward["p50_ci"] == [1.25, 1.25]
        and forward["verdict"] == SLOWER
    )
    assert forward["p99_ratio"] == 1.25 and forward["p99_ci"] == [1.25, 1.25]
    assert (
        parse["p50_ratio"] == 1.0
        and parse["p50_ci"] == [1.0, 1.0]
        and parse["verdict"] == NO_DIFFERENCE
    )
    assert found["end_to_end"]["verdict"] == SLOWER
    assert parse["p50_a_ms"] == parse["p50_b_ms"]
    assert set(forward) >= {"name", "p50_ratio", "p50_ci", "p99_ratio", "p99_ci", "verdict"}


def test_unpaired_resampling_of_the_same_data_cannot_see_it():
    samples = interleaved_samples([1.0, 3.0, 1.5, 2.0, 1.0, 2.5], 1.25)
    blocks = [
        {n: round_blocks(s[n], s["round"]) for n in ("parse", "forward", "end_to_end")}
        for s in (samples[samples["config"] == 0], samples[samples["config"] == 1])
    ]
    found = compare_blocks(blocks[0], blocks[1], ["parse", "forward"], paired=False, resamples=200)
    assert found["stages"][1]["verdict"] == TOO_NOISY
    names, seed_5 = ["parse", "forward"], VerdictOptions(resamples=200, seed=5)
    assert (
        compare_blocks(*blocks, names, paired=False, options=VerdictOptions(resamples=200)) == found
    )
    assert compare_blocks(*blocks, names, paired=False, options=seed_5, seed=0) == found


def test_a_noisy_machine_widens_the_margin_by_the_drift_and_metric_picks_the_ratio():
    samples = interleaved_samples([1.0, 1.0, 1.0, 1.0], 1.25)
    found = paired_comparison(samples, ["parse", "forward"], noisy=True)
    assert [e["verdict"] for e in found["stages"]] == [
        NO_DIFFERENCE,
        SLOWER,
    ]  # no drift: both resolved
    assert found["stages"][1]["p50_drift"] == 0.0 and found["stages"][1]["p99_verdict"] == SLOWER
    # B's forward 1.25 x A's in the first half of the rounds, 1.6 x in the second: the ratio drifted by 28 %,
    # more than the interval's low end clears (1.25 < 1.28)
    drifting = pd.concat(
        [
            interleaved_samples([1.0, 1.0], 1.25),
            interleaved_samples([1.0, 1.0], 1.6).assign(round=lambda d: d["round"] + 2),
        ]
    )
    forward = paired_comparison(drifting, ["parse", "forward"], noisy=True, resamples=400)[
        "stages"
    ][1]
    assert (
        forward["p50_drift"] == 0.28
        and forward["p50_ci"][0] == 1.25
        and forward["verdict"] == TOO_NOISY
    )
    assert (
        paired_comparison(drifting, ["parse", "forward"], resamples=400)["stages"][1]["verdict"]
        == SLOWER
    )
    p99 = paired_comparison(
        samples, ["parse", "forward"], metric="p99", resamples=400
    )  # 100 could not reach p < 0.05/3
    assert p99["stages"][1]["verdict"] == SLOWER
    with pytest.raises(ConfigError, match="metric must be one of p50, p99"):
        paired_comparison(samples, ["parse", "forward"], metric="p90")


def test_failed_requests_are_left_out_and_an_empty_side_is_refused():
    samples = interleaved_samples([1.0, 1.0], 1.25)
    samples.loc[samples.index[:3], "ok"] = False
    samples.loc[samples.index[:3], "forward"] = 10**12  # would dominate if it were used
    assert (
        paired_comparison(samples, ["parse", "forward"], resamples=50)["stages"][1]["p50_ratio"]
        < 1.3
    )
    samples["ok"] = samples["config"] == 0
    with pytest.raises(ConfigError, match="configuration 1 has no successful measured request"):
        paired_comparison(samples, ["parse", "forward"])


def matrix(values_ms: list[float]) -> pd.DataFrame:
    ns = [int(v * 1_000_000) for v in values_ms]
    return pd.DataFrame({"forward": ns, "end_to_end": ns})


def test_separate_runs_resolution_is_the_larger_of_interval_and_drift():
    a = matrix([1.0] * 10 + [1.1] * 10)  # drifted 10 % between its halves
    b = matrix([1.0] * 20)
    res = resolution(consecutive_blocks(a["end_to_end"]), consecutive_blocks(b["end_to_end"]))
    assert res["drift_a"] == 0.1 and res["drift_b"] == 0.0
    # resampling A's two blocks gives p50 1.0, 1.05 or 1.1: ratios 1.0, 0.9524, 0.9091 around 0.9524
    assert res["ci_half_width"] == round(1.0 - 1.0 / 1.05, 4)
    assert res["min_difference"] == 0.1
    found = separate_comparison(a, b, ["forward"], noisy=(False, False))
    assert found["kind"] == "separate runs" and found["noisy"] == [False, False]
    # the 10 % resolution is the margin: the interval [0.909, 1.0] lies inside 1 +- 0.1
    assert found["min_effect"] == 0.1 and found["stages"][0]["verdict"] == NO_DIFFERENCE
    assert found["stages"][0]["p50_drift"] is None
    # a run flagged noisy: what the machine did between the runs is unknown (issue 37)
    noisy = separate_comparison(a, b, ["forward"], noisy=(True, False))
    assert noisy["noisy"] == [True, False] and noisy["stages"][0]["verdict"] == TOO_NOISY


def test_separate_runs_taken_apart_on_a_noisy_machine_are_too_noisy_to_tell():
    # issue 37: two saved runs of one pair of configurations read x13.4 and x0.028 "slower", tight intervals
    for b_ms in (13.4, 0.028):
        found = separate_comparison(
            matrix([1.0] * 30), matrix([b_ms] * 30), ["forward"], noisy=(False, True)
        )
        assert found["end_to_end"]["p50_ratio"] == b_ms
        assert found["end_to_end"]["p50_verdict"] == TOO_NOISY
        assert found["end_to_end"]["p99_verdict"] == TOO_NOISY
        assert found["taken_apart"]["noisy"] is True


def test_separate_runs_intervals_are_widened_by_both_noise_records():
    found = separate_comparison(
        matrix([1.0] * 30),
        matrix([2.0] * 30),
        ["forward"],
        noisy=(False, False),
        shares=(0.1, 0.25),
    )
    assert found["taken_apart"] == {
        "interleaved": False,
        "shares": [0.1, 0.25],
        "widen": 1.375,  # 1.1 * 1.25
        "noisy": False,
    }
    assert found["end_to_end"]["p50_ci"] == [round(2.0 / 1.375, 4), 2.75]
    assert found["end_to_end"]["verdict"] == SLOWER
    # 10 % slower, widened x1.1025 to [0.9977, 1.2128]: not clear of 1, not inside 1 +- 2 %
    near = separate_comparison(
        matrix([1.0] * 30),
        matrix([1.1] * 30),
        ["forward"],
        noisy=(False, False),
        shares=(0.05, 0.05),
    )
    assert near["end_to_end"]["p50_ci"] == [round(1.1 / 1.1025, 4), round(1.1 * 1.1025, 4)]
    assert near["end_to_end"]["verdict"] == TOO_NOISY


def test_separate_runs_quiet_and_clearly_slower():
    found = separate_comparison(
        matrix([1.0] * 30), matrix([2.0] * 30), ["forward"], noisy=(False, None)
    )
    assert found["min_effect"] == 0.02 and found["resolution"]["min_difference"] == 0.0
    assert found["end_to_end"]["p50_ratio"] == 2.0 and found["end_to_end"]["verdict"] == SLOWER


@pytest.mark.parametrize(
    "ratio, ci, metric_verdict, kwargs, expected",
    [
        (1.20, (1.10, 1.30), SLOWER, {}, REGRESSION),
        (1.20, (1.04, 1.30), SLOWER, {}, INCONCLUSIVE),  # real, but maybe within +5 %
        (1.03, (1.025, 1.04), SLOWER, {}, NO_REGRESSION),  # real, and all of it within +5 %
        (
            1.40,
            (1.27, 1.56),
            TOO_NOISY,
            {},
            INCONCLUSIVE,
        ),  # compare could not tell: neither can the gate
        (1.00, (0.99, 1.01), TOO_NOISY, {}, INCONCLUSIVE),  # never 0 for an inconclusive metric
        (1.00, (0.99, 1.01), NO_DIFFERENCE, {}, NO_REGRESSION),
        (1.02, (0.98, 1.07), NO_DIFFERENCE, {}, INCONCLUSIVE),  # reaches past +5 %
        (0.80, (0.70, 0.90), FASTER, {}, NO_REGRESSION),
        (
            1.00,
            (0.99, 1.01),
            NO_DIFFERENCE,
            {"resolution": 0.06},
            INCONCLUSIVE,
        ),  # separate runs resolve 6 % only
        (1.00, (0.99, 1.01), NO_DIFFERENCE, {"resolution": 0.04}, NO_REGRESSION),
        (
            1.20,
            (1.10, 1.30),
            SLOWER,
            {"resolution": 0.5},
            REGRESSION,
        ),  # resolved above the threshold anyway
    ],
)
def test_gate_decision_is_one_rule_over_the_verdict(ratio, ci, metric_verdict, kwargs, expected):
    assert gate_decision(ratio, ci, metric_verdict, 0.05, **kwargs) == expected


def test_summary_bootstrap_of_a_long_run_matches_the_exact_one(monkeypatch):
    # 40,000 requests per run (4,000 blocks): past SUMMARY_ABOVE_BLOCKS the draws resample per-unit histograms
    import workbench.analysis.verdicts as v

    rng = np.random.default_rng(1)
    a = rng.lognormal(np.log(1e6), 0.3, 40_000)
    b = rng.lognormal(np.log(1.1e6), 0.3, 40_000)
    ma, mb = (pd.DataFrame({"forward": x, "end_to_end": x + 5e4}) for x in (a, b))
    summary = v.separate_comparison(ma, mb, ["forward"], resamples=400)
    monkeypatch.setattr(v, "SUMMARY_ABOVE_BLOCKS", 10**9)
    exact = v.separate_comparison(ma, mb, ["forward"], resamples=400)
    for got, want in zip(
        [*summary["stages"], summary["end_to_end"]], [*exact["stages"], exact["end_to_end"]]
    ):
        assert got["p50_ratio"] == want["p50_ratio"] and got["verdict"] == want["verdict"] == SLOWER
        for m in ("p50_ci", "p99_ci"):
            assert got[m] == pytest.approx(want[m], abs=0.006)
    assert summary["resolution"]["ci_half_width"] == pytest.approx(
        exact["resolution"]["ci_half_width"], abs=0.004
    )


def test_unit_histograms_count_below_inside_and_above_the_window():
    from workbench.analysis.verdicts import WINDOW_BINS, unit_histograms

    blocks = consecutive_blocks(np.arange(1, 101, dtype=float))  # 10 blocks of 10
    counts, edges = unit_histograms(blocks, 50.0, units=2)
    assert counts.shape == (2, WINDOW_BINS + 2) and counts.sum() == 100
    assert edges[0] == np.percentile(np.arange(1, 101), 40) and edges[-1] == np.percentile(
        np.arange(1, 101), 60
    )
    assert (
        counts[0, 0] == 40 and counts[1, -1] == 40
    )  # 1..40 below the window (unit 0), 61..100 above (unit 1)


def test_each_side_gets_its_p999_with_interval_once_the_count_bounds_it():
    a = matrix([1.0] * 5660 + [9.0])  # 5,661 requests: p99.9 is bounded
    b = matrix([2.0] * 30)
    tail_a, tail_b = (
        separate_comparison(a, b, ["forward"])["end_to_end"][k] for k in ("tail_a", "tail_b")
    )
    # rank 0.999 * 5660 = 5654.34 of 5,661 (0-based): every one of them 1 ms but the slowest
    assert (tail_a["count"], tail_a["p999_ms"], tail_a["max_ms"]) == (5661, 1.0, 9.0)
    assert (tail_a["p999_ci_low_ms"], tail_a["p999_ci_high_ms"]) == (1.0, 9.0)
    assert tail_b["count"] == 30 and tail_b["p999_ms"] is None and tail_b["max_ms"] == 2.0


def test_unit_histograms_place_every_value_where_a_search_of_all_edges_does():
    """Issue 35: only the values inside the window are searched; the others (and ties on the window's
    edges: whole numbers, many equal to its bottom or top) land where searching every value put them."""
    from workbench.analysis.verdicts import WINDOW_BINS, unit_histograms

    values = np.round(np.random.default_rng(3).normal(50, 10, 1_000))
    for q, window in ((50.0, (40, 60)), (99.0, (97, 99.8))):
        lo, hi = np.percentile(values, window)
        edges = np.linspace(lo, hi, WINDOW_BINS + 1)
        column = np.clip(np.searchsorted(edges, values, side="right"), 0, WINDOW_BINS + 1)
        column[(values == hi) & (hi > lo)] = WINDOW_BINS
        want = np.zeros((4, WINDOW_BINS + 2))
        np.add.at(want, (np.repeat(np.arange(100) * 4 // 100, 10), column), 1)
        counts, got_edges = unit_histograms(values.reshape(100, 10), q, units=4)
        assert (got_edges == edges).all() and (counts == want).all()


def test_resampled_percentiles_of_rows_with_gaps_are_numpys_nanpercentile_in_one_pass(monkeypatch):
    # a separate comparison's resamples hold NaN where a stage missed a request or a run's last block
    # is short; np.nanpercentile computed them row by row (10 s for a 30-request run's 2,000 resamples)
    rng = np.random.default_rng(7)
    blocks = rng.integers(1_000, 9_000_000, size=(30, 10)).astype("float64")
    blocks[rng.random(blocks.shape) < 0.3] = np.nan
    blocks[4] = np.nan  # a block with no values at all
    draws = rng.integers(0, 30, size=(2_000, 3))
    sample = blocks[draws].reshape(2_000, -1)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = {q: np.nanpercentile(sample, q, axis=1) for q in (50.0, 99.0)}

    def row_by_row(*args, **kwargs):
        raise AssertionError("percentiles computed row by row")

    monkeypatch.setattr(np, "nanpercentile", row_by_row)
    for q, want in expected.items():
        assert np.array_equal(_percentile_rows(sample, q), want, equal_nan=True)
    assert np.isnan(_percentile_rows(np.full((2, 3), np.nan), 50.0)).all()
