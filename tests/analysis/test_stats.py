import math

import numpy as np
import pytest

from workbench.analysis.stats import percentile_ci_ns, percentile_ns, summarize_ns


def test_percentiles_interpolate_linearly_between_order_statistics():
    values = [10, 20, 30, 40]  # ns
    assert percentile_ns(values, 50) == 25.0
    assert percentile_ns(values, 95) == 38.5  # rank 0.95*3 = 2.85 -> 30 + 0.85*10
    assert percentile_ns(values, 99) == pytest.approx(39.7)
    assert math.isnan(percentile_ns([], 50))


def test_summary_in_milliseconds_exact():
    values = np.arange(1, 101) * 1_000_000  # 1..100 ms in ns
    s = summarize_ns(values)
    assert s == {
        "count": 100,
        "mean_ms": 50.5,
        "p50_ms": 50.5,
        "p95_ms": 95.05,
        "p99_ms": 99.01,
        "max_ms": 100.0,
    }


def test_empty_summary_has_none_figures():
    assert summarize_ns([]) == {
        "count": 0,
        "mean_ms": None,
        "p50_ms": None,
        "p95_ms": None,
        "p99_ms": None,
        "max_ms": None,
    }


def test_p99_confidence_interval_uses_order_statistics():
    values = np.arange(1, 1001)  # 1..1000
    lo, hi = percentile_ci_ns(values, 99)
    # n*p = 990, half width 1.96*sqrt(9.9) = 6.167 -> ranks floor(983.83)=983, ceil(996.17)+1=998
    assert (lo, hi) == (983.0, 998.0)


def test_p99_interval_is_unbounded_above_for_small_samples():
    lo, hi = percentile_ci_ns(np.arange(1, 301), 99)
    assert lo == 293.0 and hi is None
    assert percentile_ci_ns([], 99) == (None, None)


def test_p999_is_given_with_its_interval_only_where_the_count_bounds_it():
    from workbench.analysis.stats import requests_to_bound, tail_summary_ns

    assert requests_to_bound(99.9) == 5661
    few = tail_summary_ns(np.arange(1, 601) * 1_000_000)  # 1..600 ms
    assert few == {
        "p999_ms": None,
        "p999_ci_low_ms": None,
        "p999_ci_high_ms": None,
        "p999_needs_count": 5661,
        "max_ms": 600.0,
        "max_above_percentile": 99.502,  # 100 * 0.05 ** (1 / 600)
    }
    many = tail_summary_ns(np.arange(1, 6001) * 1_000_000)  # 1..6000 ms
    assert many["p999_ms"] == pytest.approx(5994.001)  # rank 0.999 * 5999 = 5993.001 (0-based)
    # ranks 6000*0.999 -/+ 1.96*sqrt(6000*0.999*0.001) = 5994 -/+ 4.80: floor 5989, ceil 5999 + 1
    assert (many["p999_ci_low_ms"], many["p999_ci_high_ms"]) == (5989.0, 6000.0)
    assert many["max_ms"] == 6000.0 and many["max_above_percentile"] == 99.9501
    assert tail_summary_ns([])["max_ms"] is None and tail_summary_ns([])["p999_needs_count"] == 5661


def test_far_tail_text_says_the_count_needed_or_the_interval():
    from workbench.analysis.stats import far_tail_text, tail_summary_ns

    few = {"count": 600} | tail_summary_ns(np.arange(1, 601) * 1_000_000)
    assert far_tail_text(few) == (
        "p99.9: 600 successful requests; 5661 bound it; "
        "max 600.000 ms (at or above p99.50 with 95% confidence)"
    )
    many = {"count": 6000} | tail_summary_ns(np.arange(1, 6001) * 1_000_000)
    assert far_tail_text(many) == (
        "p99.9 5994.001 ms, 95% CI [5989.000, 6000.000] ms; "
        "max 6000.000 ms (at or above p99.95 with 95% confidence)"
    )
    assert far_tail_text({"count": 0} | tail_summary_ns([])) == ""
