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
