"""Latency statistics: the one definition of percentiles the workbench uses.

Percentiles interpolate linearly between order statistics (numpy's default,
``method="linear"``; Hyndman & Fan type 7), computed on integer nanoseconds
and reported in milliseconds. The confidence interval of a percentile is the
distribution-free order-statistic interval (binomial, normal approximation):
ranks ``n*q -/+ z*sqrt(n*q*(1-q))``. It needs no resampling, so it is
deterministic; when the sample is too small for the upper rank to exist the
upper bound is None: "not bounded by this sample" (for p99 that is n < 563,
for p95 n < 110: :func:`requests_to_bound`).
"""

from __future__ import annotations

import math

import numpy as np

from ..units import NS_PER_MS

PERCENTILES = (50, 95, 99)
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


def requests_to_bound(q: float, confidence_z: float = Z_95) -> int:
    """The smallest sample size whose :func:`percentile_ci_ns` interval of the q-th percentile is bounded.

    563 for p99, 110 for p95 at 95 % confidence.
    """
    p = q / 100.0
    n = 1
    while math.ceil(n * p + confidence_z * math.sqrt(n * p * (1.0 - p))) + 1 > n:
        n += 1
    return n
