"""Latency statistics: the one definition of percentiles the workbench uses.

Percentiles interpolate linearly between order statistics (Hyndman & Fan type 7) on integer ns,
reported in ms. A percentile's confidence interval is the distribution-free order-statistic one
(ranks ``n*q -/+ z*sqrt(n*q*(1-q))``); where the upper rank does not exist the bound is None."""

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
    """The q-th percentile(s) (0-100) of ``values`` as given: the package's one definition.
    Empty input raises, as numpy does; :func:`percentile_ns` gives NaN instead."""
    return np.percentile(values, q, axis=axis, method="linear")


def percentile_ns(values_ns, q: float) -> float:
    """The q-th percentile (0-100) of nanosecond values, linear interpolation; NaN if empty."""
    arr = np.asarray(values_ns, dtype=np.int64)
    if arr.size == 0:
        return math.nan
    return float(percentiles(arr, q))


def summarize_ns(values_ns) -> dict[str, float | int | None]:
    """``{count, mean_ms, p50_ms, p95_ms, p99_ms, max_ms}`` of ns durations (None when empty)."""
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
    """:data:`TAIL_KEYS` of ns durations: p99.9 (None under ``p999_needs_count``) and the percentile
    the maximum is at or above with 95 % confidence, ``100 * 0.05**(1/n)`` (P(max < x_q) = q**n)."""
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
    """The smallest sample bounding :func:`percentile_ci_ns` of percentile q (563 for p99)."""
    p = q / 100.0
    n = 1
    while math.ceil(n * p + confidence_z * math.sqrt(n * p * (1.0 - p))) + 1 > n:
        n += 1
    return n


def far_tail_text(figures: dict) -> str:
    """``p99.9 12.300 ms, 95% CI [...] ms; max 13.500 ms (at or above p99.95 ...)`` of
    :func:`tail_summary_ns` figures with ``count``; "" when empty."""
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
