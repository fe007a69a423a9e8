"""Measurement windows (by send time), their stability and the knee of a latency-throughput sweep.

The stability rule is perf_analyzer's: docs/json.md, "sweep"."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..units import NS_PER_S
from .stats import summarize_ns

WINDOW_COLUMNS = (
    "window start_ns end_ns requests ok failed offered_rps achieved_rps p50_ms p95_ms p99_ms"
).split()
STABLE_COUNT = 3  # perf_analyzer's stability window: the last three measurements


def window_table(
    start_ns: np.ndarray, dur_ns: np.ndarray, ok: np.ndarray, window_ns: int, n_windows: int
) -> pd.DataFrame:
    """One row per window ``[k*window_ns, (k+1)*window_ns)`` of send times (ns from the origin):
    :data:`WINDOW_COLUMNS`; ``achieved_rps`` counts successful requests *finished* in it."""
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
                **{p: s[p] for p in ("p50_ms", "p95_ms", "p99_ms")},
            }
        )
    return pd.DataFrame(rows, columns=WINDOW_COLUMNS)


def within(values: Sequence[float | None], stability_pct: float) -> bool:
    """True when every value is within ``stability_pct`` % of their mean (None or NaN: False)."""
    if not values or any(v is None or not math.isfinite(v) for v in values):
        return False
    mean = sum(values) / len(values)
    return all(abs(v - mean) <= stability_pct / 100.0 * mean for v in values)


def _settled(p50_ms: Sequence, p99_ms: Sequence, stability_pct: float) -> bool:
    """perf_analyzer's rule over some windows: their p50s and their p99s are each :func:`within`."""
    return within(p50_ms, stability_pct) and within(p99_ms, stability_pct)


def first_stable(
    windows: pd.DataFrame, stability_pct: float, count: int = STABLE_COUNT
) -> int | None:
    """The first window closing ``count`` stable ones (perf_analyzer stops there); None if none."""
    p50, p99 = windows["p50_ms"].tolist(), windows["p99_ms"].tolist()
    for k in range(count - 1, len(windows)):
        lo = k - count + 1
        if _settled(p50[lo : k + 1], p99[lo : k + 1], stability_pct):
            return k
    return None


def counted_windows(
    windows: pd.DataFrame, stability_pct: float, count: int = STABLE_COUNT
) -> tuple[list[int], bool]:
    """``(windows of the point's figures, stable)``: the stable trio, else the last ``count``."""
    k = first_stable(windows, stability_pct, count)
    if k is not None:
        return list(range(k - count + 1, k + 1)), True
    n = len(windows)
    return list(range(max(0, n - count), n)), False


class StabilityWatch:
    """The stop rule a load generator asks between windows (one thread): have three settled yet?

    ``key_ns`` (send or due time, ns from the origin) says "all of this window finished"; ``stop``
    judges the finished windows ended before ``due_ns`` by :func:`first_stable`'s rule; True sets
    ``windows_run`` and ``stable_after``."""

    def __init__(
        self, window_ns: int, stability_pct: float, max_windows: int, count: int = STABLE_COUNT
    ):
        self.window_ns, self.stability_pct, self.count = int(window_ns), stability_pct, count
        self.max_windows = max_windows
        self.pending = [0] * max_windows
        self.durs_ns: list[list[int]] = [[] for _ in range(max_windows)]
        self.p50_ms: list[float | None] = []
        self.p99_ms: list[float | None] = []
        self.windows_run: int | None = None  # None: the schedule was not stopped (it ran out)
        self.stable_after: int | None = None

    def _window(self, t_ns: int) -> int | None:
        k = t_ns // self.window_ns
        return k if 0 <= k < self.max_windows else None

    def sent(self, key_ns: int) -> None:
        k = self._window(key_ns)
        if k is not None:
            self.pending[k] += 1

    def finished(self, key_ns: int, start_ns: int, dur_ns: int, ok: bool) -> None:
        k, s = self._window(key_ns), self._window(start_ns)
        if k is not None:
            self.pending[k] -= 1
        if ok and s is not None:
            self.durs_ns[s].append(dur_ns)

    def stop(self, due_ns: int) -> bool:
        """True: stop before the send due at ``due_ns`` (windows before it hold a stable trio)."""
        ended = min(due_ns // self.window_ns, self.max_windows)
        while len(self.p50_ms) < ended and self.pending[len(self.p50_ms)] == 0:
            s = summarize_ns(self.durs_ns[len(self.p50_ms)])
            self.p50_ms.append(s["p50_ms"])
            self.p99_ms.append(s["p99_ms"])
            k, last = len(self.p50_ms), slice(-self.count, None)
            if k >= self.count and _settled(
                self.p50_ms[last], self.p99_ms[last], self.stability_pct
            ):
                self.windows_run, self.stable_after = int(ended), k
                return True
        return False


def knee(points: pd.DataFrame, sla_ms: float | None) -> int | None:
    """Row of the highest ``offered_rps`` among stable points with ``p99_ms <= sla_ms``, or None."""
    if sla_ms is None or points.empty:
        return None
    p99 = pd.to_numeric(points["p99_ms"], errors="coerce")
    ok = points["stable"].astype(bool).to_numpy() & (p99 <= sla_ms).to_numpy()
    if not ok.any():
        return None
    offered = points["offered_rps"].to_numpy(dtype=float)
    return int(np.flatnonzero(ok)[np.argmax(offered[ok])])


def auto_stop(points: pd.DataFrame, sla_ms: float, min_growth: float = 0.05) -> str | None:
    """Why a doubling (``rate=auto``) sweep stops after its last point, or None to go on: its p99
    passed ``sla_ms`` (or it has none), or its ``achieved_rps`` grew under ``min_growth`` on the
    previous."""
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
