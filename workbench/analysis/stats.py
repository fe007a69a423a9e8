"""Latency statistics: the one definition of percentiles the workbench uses.

Percentiles interpolate linearly between order statistics (numpy's default,
``method="linear"``; Hyndman & Fan type 7), computed on integer nanoseconds
and reported in milliseconds. The confidence interval of a percentile is the
distribution-free order-statistic interval (binomial, normal approximation):
ranks ``n*q -/+ z*sqrt(n*q*(1-q))``. It needs no resampling, so it is
deterministic; when the sample is too small for the upper rank to exist the
upper bound is None: "not bounded by this sample" (for p99 that is n < 563,
for p95 n < 110, for p99.9 n < 5,661: :func:`requests_to_bound`).

The far tail (:func:`tail_summary_ns`): p99.9 is reported only where the sample
bounds its interval, else the count that would is given; the maximum carries the
percentile it exceeds with 95 % confidence (``P(max < x_q) = q**n``, so the
maximum of n requests is at or above ``x_q`` for ``q = 0.05**(1/n)``: p99.50 for
600 requests, p99.90 for 2,995).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..units import NS_PER_MS

PERCENTILES = (50, 95, 99)
TAIL_PERCENTILE = 99.9
TAIL_KEYS = (
    "p999_ms",
    "p999_ci_low_ms",
    "p999_ci_high_ms",
    "p999_needs_count",
    "max_ms",
    "max_above_percentile",
)
Z_95 = 1.959963984540054


def percentiles(values, q, axis: int | None = None) -> np.ndarray | np.float64:
    """The q-th percentile(s) (0-100, a number or a sequence) of ``values`` as given (no cast).

    The package's one definition: linear interpolation between order statistics (numpy's
    ``method="linear"``, Hyndman & Fan type 7). ``axis``: as numpy's (None: all values).
    Empty input raises, as numpy does; :func:`percentile_ns` gives NaN instead.
    """
    return np.percentile(values, q, axis=axis, method="linear")


def percentile_ns(values_ns, q: float) -> float:
    """The q-th percentile (0-100) of nanosecond values, linear interpolation; NaN if empty."""
    arr = np.asarray(values_ns, dtype=np.int64)
    if arr.size == 0:
        return math.nan
    return float(percentiles(arr, q))


def summarize_ns(values_ns) -> dict[str, float | int | None]:
    """``{count, mean_ms, p50_ms, p95_ms, p99_ms, max_ms}`` of nanosecond durations.

    An empty sample gives count 0 and None for every figure.
    """
    arr = np.asarray(values_ns, dtype=np.int64)
    out: dict[str, float | int | None] = {"count": int(arr.size)}
    if arr.size == 0:
        return out | {"mean_ms": None, **{f"p{p}_ms": None for p in PERCENTILES}, "max_ms": None}
    out["mean_ms"] = float(arr.mean()) / NS_PER_MS
    for p, value in zip(PERCENTILES, percentiles(arr, PERCENTILES)):
        out[f"p{p}_ms"] = float(value) / NS_PER_MS
    out["max_ms"] = float(arr.max()) / NS_PER_MS
    return out


def tail_summary_ns(values_ns, confidence_z: float = Z_95) -> dict[str, float | int | None]:
    """The far tail of nanosecond durations: p99.9 with its interval where the count bounds it, the maximum.

    ``{p999_ms, p999_ci_low_ms, p999_ci_high_ms, p999_needs_count, max_ms, max_above_percentile}``:
    the p99.9 figures are None below ``p999_needs_count`` requests (5,661 at 95 %: the count whose
    order-statistic interval is bounded); ``max_above_percentile`` is the percentile (0-100) the
    maximum is at or above with 95 % confidence, ``100 * 0.05**(1/n)`` (None when empty).
    """
    arr = np.asarray(values_ns, dtype=np.int64)
    need = requests_to_bound(TAIL_PERCENTILE, confidence_z)
    out: dict[str, float | int | None] = dict.fromkeys(TAIL_KEYS)
    out["p999_needs_count"] = need
    if arr.size == 0:
        return out
    out["max_ms"] = float(arr.max()) / NS_PER_MS
    miss = 1.0 - math.erf(confidence_z / math.sqrt(2.0))  # 0.05 for 95 %
    out["max_above_percentile"] = round(100.0 * miss ** (1.0 / arr.size), 4)
    if arr.size >= need:
        lo, hi = percentile_ci_ns(arr, TAIL_PERCENTILE, confidence_z)
        out["p999_ms"] = float(percentiles(arr, TAIL_PERCENTILE)) / NS_PER_MS
        out["p999_ci_low_ms"], out["p999_ci_high_ms"] = lo / NS_PER_MS, hi / NS_PER_MS
    return out


def percentile_ci_ns(
    values_ns, q: float, confidence_z: float = Z_95
) -> tuple[float | None, float | None]:
    """Order-statistic confidence interval (ns) of the q-th percentile; None where unbounded."""
    arr = np.sort(np.asarray(values_ns, dtype=np.int64))
    n = arr.size
    if n == 0:
        return None, None
    p = q / 100.0
    half = confidence_z * math.sqrt(n * p * (1.0 - p))
    lo_rank = math.floor(n * p - half)  # 1-based ranks
    hi_rank = math.ceil(n * p + half) + 1
    lo = float(arr[lo_rank - 1]) if lo_rank >= 1 else None
    hi = float(arr[hi_rank - 1]) if hi_rank <= n else None
    return lo, hi


@functools.cache
def requests_to_bound(q: float, confidence_z: float = Z_95) -> int:
    """The smallest sample size whose :func:`percentile_ci_ns` interval of the q-th percentile is bounded.

    563 for p99, 110 for p95 at 95 % confidence.
    """
    p = q / 100.0
    n = 1
    while math.ceil(n * p + confidence_z * math.sqrt(n * p * (1.0 - p))) + 1 > n:
        n += 1
    return n


def far_tail_text(figures: dict) -> str:
    """One line on p99.9 and the maximum of :func:`tail_summary_ns` figures with ``count``; "" when empty.

    ``p99.9 12.300 ms, 95% CI [12.100, 12.900] ms; max 13.500 ms (at or above p99.95 with 95%
    confidence)``, or, below ``p999_needs_count`` requests, ``p99.9: 600 successful requests; 5661
    bound it; ...``.
    """
    if not figures.get("count") or figures.get("max_ms") is None:
        return ""
    if figures.get("p999_ms") is None:
        p999 = (
            f"p99.9: {figures['count']} successful requests; {figures['p999_needs_count']} bound it"
        )
    else:
        lo, hi = figures["p999_ci_low_ms"], figures["p999_ci_high_ms"]
        p999 = f"p99.9 {figures['p999_ms']:.3f} ms, 95% CI [{lo:.3f}, {hi:.3f}] ms"
    above = f"p{figures['max_above_percentile']:.2f}"
    return f"{p999}; max {figures['max_ms']:.3f} ms (at or above {above} with 95% confidence)"
