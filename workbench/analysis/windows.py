"""Measurement windows, their stability, and the knee of a latency-throughput sweep.

A sweep point is one continuous load run cut into windows of ``window_ns`` by
each request's send (arrival) time. Triton perf_analyzer's rule decides when
the point's latency has settled: the last ``count`` (3) windows are stable when
each one's p50 and each one's p99 lie within ``stability_pct`` % of the mean of
those windows. The point's figures are then those of the requests sent in
those three windows; a point that never settles reports its last three windows
and says it is unstable.

Everything here is pure: arrays and tables in, tables and numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..units import NS_PER_S
from .stats import summarize_ns

WINDOW_COLUMNS = [
    "window",
    "start_ns",
    "end_ns",
    "requests",
    "ok",
    "failed",
    "offered_rps",
    "achieved_rps",
    "p50_ms",
    "p95_ms",
    "p99_ms",
]
STABLE_COUNT = 3  # perf_analyzer's stability window: the last three measurements


def window_table(
    start_ns: np.ndarray, dur_ns: np.ndarray, ok: np.ndarray, window_ns: int, n_windows: int
) -> pd.DataFrame:
    """One row per window ``[k*window_ns, (k+1)*window_ns)`` of request send times.

    In: per request its send time ``start_ns`` (from the run's origin), end to
    end ``dur_ns`` and ``ok``. Out: :data:`WINDOW_COLUMNS`: ``requests`` sent
    in the window (``ok``/``failed`` of them), ``offered_rps`` = sent / window,
    ``achieved_rps`` = successful requests *finished* in the window / window,
    and end-to-end percentiles (ms) of the window's successful requests
    (None when it has none).
    """
    start = np.asarray(start_ns, dtype=np.int64)
    end = start + np.asarray(dur_ns, dtype=np.int64)
    good = np.asarray(ok, dtype=bool)
    seconds = window_ns / NS_PER_S
    rows = []
    for k in range(n_windows):
        lo, hi = k * window_ns, (k + 1) * window_ns
        sent = (start >= lo) & (start < hi)
        done = good & (end >= lo) & (end < hi)
        s = summarize_ns(np.asarray(dur_ns, dtype=np.int64)[sent & good])
        rows.append(
            {
                "window": k,
                "start_ns": lo,
                "end_ns": hi,
                "requests": int(sent.sum()),
                "ok": int((sent & good).sum()),
                "failed": int((sent & ~good).sum()),
                "offered_rps": int(sent.sum()) / seconds,
                "achieved_rps": int(done.sum()) / seconds,
                "p50_ms": s["p50_ms"],
                "p95_ms": s["p95_ms"],
                "p99_ms": s["p99_ms"],
            }
        )
    return pd.DataFrame(rows, columns=WINDOW_COLUMNS)


def within(values: Sequence[float | None], stability_pct: float) -> bool:
    """True when every value is within ``stability_pct`` % of their mean (None or NaN: False)."""
    if not values or any(v is None or not math.isfinite(v) for v in values):
        return False
    mean = sum(values) / len(values)
    return all(abs(v - mean) <= stability_pct / 100.0 * mean for v in values)


def first_stable(
    windows: pd.DataFrame, stability_pct: float, count: int = STABLE_COUNT
) -> int | None:
    """The first window ``k`` at which windows ``k-count+1 .. k`` have stable p50 and p99; None if none has.

    In: a :func:`window_table`. Measuring stops there (perf_analyzer stops at
    the first stable trio), so later windows are not looked at.
    """
    p50, p99 = windows["p50_ms"].tolist(), windows["p99_ms"].tolist()
    for k in range(count - 1, len(windows)):
        lo = k - count + 1
        if within(p50[lo : k + 1], stability_pct) and within(p99[lo : k + 1], stability_pct):
            return k
    return None


def counted_windows(
    windows: pd.DataFrame, stability_pct: float, count: int = STABLE_COUNT
) -> tuple[list[int], bool]:
    """``(windows whose requests make the point's figures, stable)``: the stable trio, else the last ``count``."""
    k = first_stable(windows, stability_pct, count)
    if k is not None:
        return list(range(k - count + 1, k + 1)), True
    n = len(windows)
    return list(range(max(0, n - count), n)), False


def knee(points: pd.DataFrame, sla_ms: float | None) -> int | None:
    """Row position of the knee: the highest ``offered_rps`` among stable points whose ``p99_ms`` <= ``sla_ms``.

    In: one row per point with ``offered_rps``, ``p99_ms``, ``stable``. None
    without an SLA or when no stable point meets it.
    """
    if sla_ms is None or points.empty:
        return None
    p99 = pd.to_numeric(points["p99_ms"], errors="coerce")
    ok = points["stable"].astype(bool).to_numpy() & (p99 <= sla_ms).to_numpy()
    if not ok.any():
        return None
    offered = points["offered_rps"].to_numpy(dtype=float)
    return int(np.flatnonzero(ok)[np.argmax(offered[ok])])


def auto_stop(points: pd.DataFrame, sla_ms: float, min_growth: float = 0.05) -> str | None:
    """Why a doubling (``rate=auto``) sweep stops after its last point, or None to go on.

    "p99 passed the SLA" when the last point's ``p99_ms`` > ``sla_ms`` (or it
    has no successful request); "throughput stopped growing" when its
    ``achieved_rps`` is less than ``1 + min_growth`` times the previous point's.
    """
    last = points.iloc[-1]
    if last["p99_ms"] is None or not math.isfinite(last["p99_ms"]) or last["p99_ms"] > sla_ms:
        return "p99 passed the SLA"
    if (
        len(points) >= 2
        and last["achieved_rps"] < (1.0 + min_growth) * points.iloc[-2]["achieved_rps"]
    ):
        return "throughput stopped growing"
    return None


def ratio(measured: float | None, predicted: float | None) -> float | None:
    """``measured / predicted``; None when either is missing or the prediction is not positive."""
    if measured is None or predicted is None or not math.isfinite(measured) or not predicted > 0:
        return None
    return measured / predicted
