"""GPU timeline: busy and idle over time, idle per stream (:mod:`workbench.analysis.gpu_timeline`),
and the TensorBoard plugin's step time breakdown (:mod:`workbench.analysis.steps`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.gpu_timeline import busy_over_time, gpu_time_summary, stream_idle
from ..trace import Trace
from ..analysis.steps import step_breakdown
from .style import KIND_COLORS, NO_GPU_EVENTS, NS_PER_MS, empty_figure, format_ns, layout

IDLE_PARTS = {
    "busy_ns": ("busy", KIND_COLORS["kernel"]),
    "host_wait_ns": ("idle: host wait", KIND_COLORS["runtime"]),
    "kernel_wait_ns": ("idle: kernel wait (< 30 us)", KIND_COLORS["memset"]),
    "other_ns": ("idle: other", KIND_COLORS["other"]),
}


def gpu_timeline_figure(
    events: Trace | pd.DataFrame, *, bins: int = 400, title: str | None = None
) -> go.Figure:
    """Top: GPU busy fraction (%) per time bin, x = ms since the first GPU work. Bottom: per
    (device, stream) busy and idle time (ms) stacked, idle split as HTA does."""
    events = Trace.of(events)  # one trace model for the three analyses drawn
    summary = gpu_time_summary(events)
    if summary["span_ns"] is None:
        return empty_figure(NO_GPU_EVENTS, title or "GPU timeline")
    busy = busy_over_time(events, bins=bins)
    fig = make_subplots(
        rows=2,
        cols=1,
        row_heights=[0.55, 0.45],
        vertical_spacing=0.2,
        subplot_titles=("GPU busy over time", "busy and idle per stream"),
    )
    x = (busy["bin_start_ns"].to_numpy() - summary["start_ns"]) / NS_PER_MS
    x = np.append(x, (busy["bin_end_ns"].iloc[-1] - summary["start_ns"]) / NS_PER_MS)
    y = 100 * busy["busy_fraction"].to_numpy()
    fig.add_scatter(
        x=x,
        y=np.append(y, y[-1]),
        mode="lines",
        line=dict(shape="hv", color=KIND_COLORS["kernel"]),
        fill="tozeroy",
        name="busy %",
        showlegend=False,
        hovertemplate="from %{x:.3f} ms<br>busy %{y:.1f}%<extra></extra>",
        row=1,
        col=1,
    )
    lanes = _add_stream_idle(fig, stream_idle(events))
    fig.update_xaxes(title_text="time since first GPU work (ms)", row=1, col=1)
    fig.update_yaxes(title_text="busy (%)", range=[0, 100], row=1, col=1)
    fig.update_xaxes(title_text="time (ms)", row=2, col=1)
    head = (
        f"GPU busy {format_ns(summary['busy_ns'])} of a {format_ns(summary['span_ns'])} span "
        f"(idle {100 * summary['idle_fraction']:.0f}%)"
    )
    return layout(
        fig, title or head, barmode="stack", height=max(520, 420 + 24 * lanes), legend="right"
    )


def _add_stream_idle(fig: go.Figure, idle: pd.DataFrame) -> int:
    """Bottom: busy and idle time (ms) per (device, stream), stacked; the number of lanes."""
    lanes = [
        f"GPU {d} stream {s}"
        for d, s in zip(idle["device"].astype(str), idle["stream"].astype(str))
    ]
    for col, (name, color) in IDLE_PARTS.items():
        fig.add_bar(
            y=lanes,
            x=idle[col].to_numpy() / NS_PER_MS,
            orientation="h",
            name=name,
            marker_color=color,
            hovertemplate="%{y}<br>" + name + " %{x:.3f} ms<extra></extra>",
            row=2,
            col=1,
        )
    return len(lanes)


BREAKDOWN = {
    "kernel_ns": ("kernel", KIND_COLORS["kernel"]),
    "memcpy_ns": ("memcpy", KIND_COLORS["memcpy_htod_pageable"]),
    "memset_ns": ("memset", KIND_COLORS["memset"]),
    "communication_ns": ("communication", "#17becf"),
    "runtime_ns": ("runtime", KIND_COLORS["runtime"]),
    "dataloader_ns": ("data loader", "#bcbd22"),
    "cpu_exec_ns": ("CPU exec", KIND_COLORS["cpu_op"]),
    "other_ns": ("other", KIND_COLORS["other"]),
}


def grouped_steps(breakdown: pd.DataFrame, max_bars: int) -> pd.DataFrame:
    """At most ``max_bars`` rows: consecutive steps averaged (ns per step) in equal groups ``"a-b"``."""
    if len(breakdown) <= max_bars:
        return breakdown
    group = np.arange(len(breakdown)) * max_bars // len(breakdown)
    cols = [*BREAKDOWN, "total_ns"]
    means = breakdown[cols].groupby(group).mean()
    labels = breakdown["step"].astype(str).groupby(group).agg(lambda s: f"{s.iloc[0]}-{s.iloc[-1]}")
    return means.assign(step=labels.to_numpy()).reset_index(drop=True)


def step_breakdown_figure(
    events: Trace | pd.DataFrame, *, max_bars: int = 200, title: str | None = None
) -> go.Figure:
    """Stacked bars per step (ms) of :func:`workbench.analysis.steps.step_breakdown` (the parts sum
    to the step's time); more than ``max_bars`` steps are averaged in groups."""
    breakdown = step_breakdown(Trace.of(events))
    if breakdown.empty:
        return empty_figure("no host or GPU events to break down", title or "Step time breakdown")
    shown = grouped_steps(breakdown, max_bars)
    labels = shown["step"].astype(str).tolist()
    fig = go.Figure()
    for col, (name, color) in BREAKDOWN.items():
        fig.add_bar(
            x=labels,
            y=shown[col].to_numpy() / NS_PER_MS,
            name=name,
            marker_color=color,
            hovertemplate="step %{x}<br>" + name + " %{y:.3f} ms<extra></extra>",
        )
    total = int(breakdown["total_ns"].sum())
    kernel = int(breakdown["kernel_ns"].sum())
    head = (
        f"Step time breakdown: {len(breakdown)} step(s), mean {format_ns(total / len(breakdown))}, "
        f"kernels {100 * kernel / total:.0f}% of step time"
        if total
        else "Step time breakdown"
    )
    per = " (mean per step in each group)" if len(shown) < len(breakdown) else ""
    fig.update_xaxes(type="category")
    return layout(
        fig, title or head, barmode="stack", xaxis_title="step" + per, yaxis_title="time (ms)"
    )
