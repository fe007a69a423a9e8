"""The far tail: survival (1 - CDF) of latency on a log y axis, with p99 and p99.9.

y at x is the share of measured successful requests that took x or longer, so one request in a
thousand is a step three decades down instead of the last pixel of a CDF.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..analysis.stats import NS_PER_MS, percentiles, tail_summary_ns
from .distributions import latency_samples, stage_pick
from .style import PERCENTILE_COLORS, empty_figure, layout, value_axis

P999_COLOR = "#d62728"


def survival_points(values_ns: np.ndarray, max_points: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """(x in ms ascending, y = share of requests at x or slower) of the sorted values, at most about
    ``max_points`` points: every rank from the slowest ``max_points // 2``, log-spaced ranks below."""
    s = np.sort(np.asarray(values_ns, dtype=np.int64))
    n = s.size
    from_top = np.arange(1, n + 1)  # 1 = the slowest request
    if n > max_points:
        exact = np.arange(1, max_points // 2 + 1)
        spread = np.geomspace(1, n, max_points - exact.size).round().astype(np.int64)
        from_top = np.unique(np.concatenate([exact, spread]))
    idx = n - from_top[::-1]  # ascending positions in s
    return s[idx] / NS_PER_MS, (n - idx) / n


def survival_figure(
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    stage_order: list[str],
    *,
    stage: str | None = None,
    max_points: int = 2000,
    title: str | None = None,
) -> go.Figure:
    """Share of measured successful requests at least x ms long (log x, log y), warm-up left out.

    Traces, in order: "measured (n=N)", "p99 X ms", the maximum as a cross, then the p99.9 line
    with its 95 % interval or, below the count that bounds it, a legend entry saying so.
    """
    label, color = stage_pick("survival_figure", stage, stage_order)
    title = title or f"Far tail: {label} (share of requests at least this slow)"
    measured, _ = latency_samples(requests, stages, stage)
    if measured.size == 0:
        return empty_figure(f"no successful measured requests for {label}", title)
    x, y = survival_points(measured, max_points)
    fig = go.Figure()
    name = f"measured (n={measured.size})"
    fig.add_scatter(
        x=x,
        y=y,
        name=name,
        mode="lines",
        line=dict(shape="vh", color=color),
        hovertemplate="%{x:.4g} ms or slower: %{y:.3g}<extra>" + name + "</extra>",
    )
    _add_tail_lines(fig, measured)
    fig.update_xaxes(**value_axis(True, "ms", x))
    fig.update_yaxes(**_share_axis(measured.size))
    return layout(
        fig,
        title,
        xaxis_title=f"{label} latency (ms, log scale)",
        yaxis_title="share this slow or slower",  # a longer title ran off a 450 px figure
    )


def _add_tail_lines(fig: go.Figure, measured: np.ndarray) -> None:
    """p99 as a dotted vertical line, the maximum as a cross, then p99.9 or the count it needs."""
    bottom = 1 / measured.size
    p99 = float(percentiles(measured, 99)) / NS_PER_MS
    _vline(fig, p99, f"p99 {p99:.3g} ms", PERCENTILE_COLORS["p99_ms"], bottom)
    tail = tail_summary_ns(measured)
    fig.add_scatter(
        x=[tail["max_ms"]],
        y=[bottom],
        name=f"max {tail['max_ms']:.3g} ms (at or above p{tail['max_above_percentile']:.2f})",
        mode="markers",
        marker=dict(color=P999_COLOR, size=9, symbol="x"),
        hovertemplate="max %{x:.4g} ms<extra></extra>",
    )
    if tail["p999_ms"] is None:
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="lines",
            line=dict(color=P999_COLOR, dash="dot", width=2),
            name=f"p99.9: {measured.size} requests; {tail['p999_needs_count']} bound it",
        )
        return
    lo, hi = tail["p999_ci_low_ms"], tail["p999_ci_high_ms"]
    name = f"p99.9 {tail['p999_ms']:.4g} ms [{lo:.4g}, {hi:.4g}]"
    _vline(fig, tail["p999_ms"], name, P999_COLOR, bottom)


def _vline(fig: go.Figure, x: float, name: str, color: str, bottom: float) -> None:
    fig.add_scatter(
        x=[x, x],
        y=[bottom, 1.0],
        name=name,
        mode="lines",
        line=dict(color=color, dash="dot", width=2),
        hovertemplate=f"{name}<extra></extra>",
    )


def _share_axis(n: int) -> dict:
    """A log axis from 1 down past ``1 / n``, a tick per decade labelled "all", "1 in 10", "1 in 100"..."""
    decades = max(1, math.ceil(math.log10(n)))
    vals = [10.0**-d for d in range(decades + 1)]
    text = ["all"] + [f"1 in {10**d:,}" for d in range(1, decades + 1)]
    return dict(type="log", range=[-decades - 0.1, 0.05], tickvals=vals, ticktext=text)
