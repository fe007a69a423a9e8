"""Kernel launches (:mod:`workbench.analysis.launches`): launch delay, CPU launch time vs GPU time,
short-kernel share, a verdict; binned here, so a million launches cost a few kilobytes of figure."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.launches import launch_distribution, launch_pair_summary, steady_launch_pairs
from ..trace import Trace
from ..analysis.trace_stages import launch_verdict
from ..units import NS_PER_US
from .style import (
    CENTER,
    KIND_COLORS,
    NO_GPU_EVENTS,
    PERCENTILE_COLORS,
    add_bars,
    add_step_area,
    decade_ticks,
    empty_figure,
    layout,
    log_axis,
    log_edges,
    positive_extent,
    value_axis,
)

BINS = 40
# the verdict's line length at 17 px: one 150-character line ran out of a 1150 px figure
TITLE_CHARS = 110
# the panels after the launch delay's (top left), row by row
PANEL_TITLES = ("launch call vs GPU time (count)", "percentiles (us)", "short kernels")


def launch_figure(
    events: Trace | pd.DataFrame, *, title: str | None = None, bins: int = BINS
) -> go.Figure:
    """Four panels over the launch pairs (us): the launch delay histogram, launch time vs GPU time
    (2-D, log10, with y = x), their p50/p90/p99, and the short kernels (HTA's rule) vs the rest;
    the title is :func:`launch_verdict`'s sentence."""
    events = Trace.of(events)
    pairs = steady_launch_pairs(events)  # cold start apart, as in the verdict of the title
    if pairs.empty:
        return empty_figure(
            NO_GPU_EVENTS if events.gpu_work.empty else "no kernel launches joined to GPU work",
            title or "Kernel launches",
        )
    summary = launch_pair_summary(pairs)
    _, sentence = launch_verdict(events)
    delay_us = pairs["launch_delay_ns"].to_numpy() / NS_PER_US
    zero = int((delay_us <= 0).sum())
    zeros = f" ({zero} of {delay_us.size} zero, not on the log axis)" if zero else ""
    titles = ("launch delay" + zeros, *PANEL_TITLES)
    fig = make_subplots(
        rows=2, cols=2, vertical_spacing=0.16, horizontal_spacing=0.12, subplot_titles=titles
    )
    _delay_hist(fig, delay_us, bins)
    _cpu_vs_gpu(fig, pairs, bins)
    dist = launch_distribution(pairs)
    _percentiles(fig, dist)
    short_share = _short_kernels(fig, summary)
    delay = float(dist.set_index("metric").loc["launch_delay", "p50_ns"]) / NS_PER_US
    numbers = (
        f"<br><sup>{short_share:.0f}% of {summary['count']} launches are short kernels; median launch delay "
        f"{delay:.3g} us; {summary['delay_over_100us']} delays over 100 us</sup>"
    )
    # the percentiles' legend under the bottom panels: above the plots it sat on the delay panel's title
    legend = dict(orientation="h", yanchor="top", y=-0.06, xanchor="left", x=0)
    head = title or "<br>".join(textwrap.wrap(sentence, TITLE_CHARS)) + numbers
    return layout(fig, head, height=700, margin=dict(t=130), legend=legend)


def _short_kernels(fig: go.Figure, summary: dict) -> float:
    """The short kernels against the other launches (bottom right); their share in %."""
    short, count = summary["short_kernels"], summary["count"]
    fig.add_bar(
        x=["short kernels", "other launches"],
        y=[short, count - short],
        marker_color=[KIND_COLORS["kernel"], KIND_COLORS["runtime"]],
        showlegend=False,
        text=[f"{100 * short / count:.1f}%", f"{100 * (1 - short / count):.1f}%"],
        hovertemplate="%{x}: %{y}<extra></extra>",
        row=2,
        col=2,
    )
    fig.update_yaxes(title_text="launches", row=2, col=2)
    return 100 * short / count


def _delay_hist(fig: go.Figure, delay_us: np.ndarray, bins: int) -> None:
    """Positive delays only, on a log axis (zero delays are a count in the panel's title)."""
    positive = delay_us[delay_us > 0]
    if positive.size == 0:
        fig.add_annotation(
            text="every launch delay is zero",
            xref="x domain",
            yref="y domain",
            row=1,
            col=1,
            **CENTER,
        )
        return
    edges = log_edges(positive, bins)
    counts, _ = np.histogram(positive, bins=edges)
    hover = "from %{x:.3g} us<br>%{y} launches<extra></extra>"
    color = KIND_COLORS["runtime"]
    add_step_area(fig, edges, counts, "launch delay", color, hover, showlegend=False, row=1, col=1)
    axis = value_axis(True, "us", positive)
    fig.update_xaxes(title_text="launch delay (us, log scale)", row=1, col=1, **axis)
    fig.update_yaxes(title_text="launches", row=1, col=1)


def _cpu_vs_gpu(fig: go.Figure, pairs: pd.DataFrame, bins: int) -> None:
    cpu_us, gpu_us = (pairs[c].to_numpy() / NS_PER_US for c in ("cpu_dur_ns", "gpu_dur_ns"))
    edges = np.log10(log_edges(np.concatenate([cpu_us, gpu_us]), bins))
    counts, _, _ = np.histogram2d(
        np.log10(np.maximum(cpu_us, 10 ** edges[0])),
        np.log10(np.maximum(gpu_us, 10 ** edges[0])),
        bins=[edges, edges],
    )
    centers = (edges[:-1] + edges[1:]) / 2
    z = np.where(counts.T > 0, counts.T, np.nan)
    fig.add_heatmap(
        x=centers,
        y=centers,
        z=z,
        colorscale="Viridis",
        showscale=True,
        colorbar=dict(
            title=dict(text="launches", side="right"), x=1.0, y=0.79, len=0.42, thickness=12
        ),
        hovertemplate="launch %{x:.2f} log10 us<br>GPU %{y:.2f} log10 us<br>%{z} launches<extra></extra>",
        row=1,
        col=2,
    )
    fig.add_scatter(
        x=[edges[0], edges[-1]],
        y=[edges[0], edges[-1]],
        mode="lines",
        name="GPU = launch",
        line=dict(color="#d62728", dash="dash"),
        showlegend=False,
        row=1,
        col=2,
    )
    ticks = decade_ticks(edges[0], edges[-1], "us")
    fig.update_xaxes(title_text="launch call CPU time (us)", row=1, col=2, **ticks)
    fig.update_yaxes(title_text="GPU time (us)", row=1, col=2, **ticks)


def _percentiles(fig: go.Figure, dist: pd.DataFrame) -> None:
    """p50/p90/p99 bars per metric; the log axis starts a decade below the smallest (else a sliver)."""
    names = {"cpu_dur": "launch call", "launch_delay": "launch delay", "gpu_dur": "GPU time"}
    parts = [
        (col.removesuffix("_ns"), dist[col].to_numpy(dtype=float) / NS_PER_US, color)
        for col, color in zip(("p50_ns", "p90_ns", "p99_ns"), PERCENTILE_COLORS.values())
    ]
    x = [names[m] for m in dist["metric"]]
    add_bars(fig, x, parts, "%{x} ", "us", legendgroup="percentiles", row=2, col=1)
    lo, hi = positive_extent(*(values for _, values, _ in parts))
    fig.update_yaxes(title_text="us (log scale)", row=2, col=1, **log_axis(lo / 10, hi, "us"))
