"""Latency distributions: histogram or CDF of one stage or end to end, warm-up apart, and the far
tail's survival (1 - CDF) on a log y axis. Bins are sent as counts and curves thinned, so the
payload does not grow with the number of requests.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..analysis.stats import NS_PER_MS, percentiles, summarize_ns, tail_summary_ns
from ..errors import ConfigError
from .style import (
    PERCENTILE_COLORS,
    WARMUP_COLOR,
    add_step_area,
    empty_figure,
    layout,
    stage_color,
    value_axis,
)

DISTRIBUTION_KINDS = ("histogram", "cdf")  # figure styles; trace event kinds: workbench.trace.KINDS
BINS = 60  # of the histogram, over the range of its values


def stage_samples(
    figure: str,
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    stage_order: list[str],
    stage: str | None,
) -> tuple[str, str, np.ndarray, np.ndarray]:
    """``(label, color, measured, warm-up)`` of ``stage`` (None: end to end), the int64 ns durations
    of its successful requests; ConfigError for a stage not in ``stage_order``."""
    ok = requests[requests["ok"].astype(bool)]
    warm_ids = set(ok.loc[ok["warmup"].astype(bool), "request"].tolist())
    if stage is None:
        label, color, durs, ids = "end to end", "#333333", ok["dur_ns"], ok["request"]
    elif stage not in stage_order:
        raise ConfigError(
            f"{figure}: stage={stage!r} is not in the pipeline's stages {list(stage_order)}"
        )
    else:
        label, color = stage, stage_color(list(stage_order).index(stage))
        rows = stages[(stages["stage"] == stage) & stages["request"].isin(ok["request"])]
        durs, ids = rows["dur_ns"], rows["request"]
    is_warm = ids.isin(warm_ids).to_numpy()
    values = durs.astype("int64").to_numpy()
    return label, color, values[~is_warm], values[is_warm]


def distribution_figure(
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    stage_order: list[str],
    *,
    stage: str | None = None,
    kind: str = "histogram",
    log_x: bool = True,
    max_points: int = 2000,
    title: str | None = None,
) -> go.Figure:
    """Histogram (request counts per bin) or CDF (fraction <= x) of latency in ms of ``stage`` (None:
    end to end). Traces, in order: measured, warm-up if any, dotted p50, p95, p99 ("p50 1.23 ms")."""
    if kind not in DISTRIBUTION_KINDS:
        raise ConfigError(f"distribution_figure: kind={kind!r}; use one of {DISTRIBUTION_KINDS}")
    samples = stage_samples("distribution_figure", requests, stages, stage_order, stage)
    label, color, measured, warm = samples
    title = title or f"Latency distribution: {label}"
    if measured.size == 0 and warm.size == 0:
        return empty_figure(f"no successful requests for {label}", title)
    both = np.concatenate([measured, warm])
    add = (
        partial(_add_hist, edges=_edges(both, log_x))
        if kind == "histogram"
        else partial(_add_cdf, max_points=max_points)
    )
    fig = go.Figure()
    add(fig, measured, f"measured (n={measured.size})", color)
    if warm.size:
        add(fig, warm, f"warm-up (n={warm.size})", WARMUP_COLOR)
    top = max((max(t.y) for t in fig.data), default=1)
    _add_markers(fig, measured, float(top))
    if kind == "cdf":
        fig.update_yaxes(**nines_axis(max(measured.size, warm.size)))
    fig.update_xaxes(**value_axis(log_x, "ms", both / NS_PER_MS))
    scale = ", log scale" if log_x else ""
    yaxis = "requests" if kind == "histogram" else "fraction of requests <= x (in nines)"
    return layout(fig, title, xaxis_title=f"{label} latency (ms{scale})", yaxis_title=yaxis)


def _edges(values_ns: np.ndarray, log_x: bool) -> np.ndarray:
    """The histogram's :data:`BINS` bins, log-spaced on a log axis."""
    lo, hi = float(values_ns.min()) / NS_PER_MS, float(values_ns.max()) / NS_PER_MS
    hi = hi if hi > lo else lo * 1.01 + 1e-6
    return np.geomspace(max(lo, 1e-6), hi, BINS + 1) if log_x else np.linspace(lo, hi, BINS + 1)


def _add_hist(fig: go.Figure, values_ns: np.ndarray, name: str, color: str, edges) -> None:
    """A step outline over the bin edges: x = edges, y = counts (last repeated), shape 'hv'."""
    # clipped into the edges: 0 ns on a log axis
    counts, _ = np.histogram(np.clip(values_ns / NS_PER_MS, edges[0], edges[-1]), bins=edges)
    hover = "from %{x:.4g} ms<br>%{y} requests<extra>" + name + "</extra>"
    add_step_area(fig, edges, counts, name, color, hover, line=dict(width=1.5), opacity=0.8)


def cdf_points(values_ns: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF (x in ms, y = rank/n), at most ``max_points`` points incl. min and max."""
    s = np.sort(values_ns)
    # evenly spaced ranks: every rank when n <= max_points (steps of at most one then)
    idx = np.unique(np.linspace(0, s.size - 1, max_points).round().astype(np.int64))
    return s[idx] / NS_PER_MS, (idx + 1) / s.size


def nines(fraction: np.ndarray, n: int) -> np.ndarray:
    """The CDF's height in nines, ``-log10(1 - fraction)`` (0.99 -> 2): each decade of the tail gets
    the same height; the last request is drawn one decade past ``1 / n``."""
    rest = np.maximum(1.0 - np.asarray(fraction, dtype=float), 1.0 / (10 * max(n, 1)))
    return -np.log10(rest)


def nines_axis(n: int) -> dict:
    """A y axis in nines up to one decade past ``1 / n``, labelled as fractions: 0, 0.9, 0.99..."""
    top = math.ceil(math.log10(max(n, 10))) + 1
    return dict(
        range=[0, top],
        tickvals=list(range(top + 1)),
        ticktext=["0"] + [f"0.{'9' * d}" for d in range(1, top + 1)],
    )


def _add_cdf(fig: go.Figure, values_ns: np.ndarray, name: str, color: str, max_points: int) -> None:
    """The CDF with its height in :func:`nines` (the fraction itself in the hover, as ``customdata``)."""
    if values_ns.size == 0:
        return
    x, y = cdf_points(values_ns, max_points)
    fig.add_scatter(
        x=x,
        y=nines(y, values_ns.size),
        customdata=y,
        name=name,
        mode="lines",
        line=dict(shape="hv", color=color),
        hovertemplate="%{x:.4g} ms<br>%{customdata:.4f} of requests<extra>" + name + "</extra>",
    )


def _add_markers(fig: go.Figure, measured_ns: np.ndarray, top: float) -> None:
    """p50/p95/p99 as vertical lines named "p50 0.0505 ms" (beside the lines they overprint)."""
    stats = summarize_ns(measured_ns)
    for key in ("p50_ms", "p95_ms", "p99_ms"):
        if stats[key] is None:
            continue
        name, color = key.removesuffix("_ms"), PERCENTILE_COLORS[key]
        hover = f"{name} %{{x:.4g}} ms<extra></extra>"
        _vline(fig, stats[key], (0, top), f"{name} {stats[key]:.3g} ms", color, hover)


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
    """Share of measured successful requests at least x ms long (log x, log y). Traces, in order:
    "measured (n=N)", "p99 X ms", the maximum, then p99.9 with its interval or the count it needs."""
    label, color, measured, _ = stage_samples(
        "survival_figure", requests, stages, stage_order, stage
    )
    title = title or f"Far tail: {label} (share of requests at least this slow)"
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
    _vline(fig, p99, (bottom, 1.0), f"p99 {p99:.3g} ms", PERCENTILE_COLORS["p99_ms"])
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
    _vline(fig, tail["p999_ms"], (bottom, 1.0), name, P999_COLOR)


def _vline(fig: go.Figure, x: float, y: tuple, name: str, color: str, hover: str = "") -> None:
    """A dotted vertical line from ``y[0]`` to ``y[1]`` at ``x``; its hover is its name by default."""
    fig.add_scatter(
        x=[x, x],
        y=list(y),
        name=name,
        mode="lines",
        line=dict(color=color, dash="dot", width=2),
        hovertemplate=hover or f"{name}<extra></extra>",
    )


def _share_axis(n: int) -> dict:
    """A log axis from 1 down past ``1 / n``, a tick per decade labelled "all", "1 in 10", "1 in 100"..."""
    decades = max(1, math.ceil(math.log10(n)))
    vals = [10.0**-d for d in range(decades + 1)]
    text = ["all"] + [f"1 in {10**d:,}" for d in range(1, decades + 1)]
    return dict(type="log", range=[-decades - 0.1, 0.05], tickvals=vals, ticktext=text)
