"""GPU timeline: busy and idle over time, idle per stream (:mod:`workbench.analysis.gpu_timeline`),
the TensorBoard plugin's step time breakdown (:mod:`workbench.analysis.steps`), and a time-axis
flame chart of one traced request (host calls by depth, GPU work per stream; only the longest
``max_bars`` events, which still nest, the title saying how many were left out)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.gpu_timeline import busy_over_time, gpu_time_summary, stream_idle
from ..analysis.trace_report import nesting_depth  # the flame tree's rule; used below
from ..analysis.steps import step_boundaries, step_breakdown
from ..errors import ConfigError
from ..naming import stage_from_range_name
from ..trace import GPU_WORK_KINDS, HOST_KINDS, KIND_SYNC, Trace
from ..units import NS_PER_MS
from .flame import HOVER_CHARS, SMALL_LABELS_HIDDEN
from .style import (
    KIND_COLORS,
    KIND_LABELS,
    NO_GPU_EVENTS,
    add_bars,
    add_step_area,
    empty_figure,
    format_ns,
    kind_key,
    layout,
)

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
    titles = ("GPU busy over time", "busy and idle per stream")
    fig = make_subplots(
        rows=2, cols=1, row_heights=[0.55, 0.45], vertical_spacing=0.2, subplot_titles=titles
    )
    x = (busy["bin_start_ns"].to_numpy() - summary["start_ns"]) / NS_PER_MS
    x = np.append(x, (busy["bin_end_ns"].iloc[-1] - summary["start_ns"]) / NS_PER_MS)
    y = 100 * busy["busy_fraction"].to_numpy()
    hover = "from %{x:.3f} ms<br>busy %{y:.1f}%<extra></extra>"
    add_step_area(fig, x, y, "busy %", KIND_COLORS["kernel"], hover, showlegend=False, row=1, col=1)
    idle = stream_idle(events)  # bottom: busy and idle time (ms) per (device, stream), stacked
    lanes = [f"GPU {d} stream {s}" for d, s in zip(idle["device"], idle["stream"])]
    parts = [(name, idle[col] / NS_PER_MS, color) for col, (name, color) in IDLE_PARTS.items()]
    add_bars(fig, lanes, parts, "%{y}<br>", orientation="h", row=2, col=1)
    fig.update_xaxes(title_text="time since first GPU work (ms)", row=1, col=1)
    fig.update_yaxes(title_text="busy (%)", range=[0, 100], row=1, col=1)
    fig.update_xaxes(title_text="time (ms)", row=2, col=1)
    head = (
        f"GPU busy {format_ns(summary['busy_ns'])} of a {format_ns(summary['span_ns'])} span "
        f"(idle {100 * summary['idle_fraction']:.0f}%)"
    )
    return layout(
        fig, title or head, barmode="stack", height=max(520, 420 + 24 * len(lanes)), legend="right"
    )


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
    parts = [(name, shown[col] / NS_PER_MS, color) for col, (name, color) in BREAKDOWN.items()]
    add_bars(fig, labels, parts, "step %{x}<br>")
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


DRAWN_HOST_KINDS = (*HOST_KINDS, KIND_SYNC)  # host rows: the flame tree's host kinds, sync waits
TEXT_CHARS = 40
LANE_PX = 26  # a lane's height: its bar (80 %) holds a 12 px label
TEXT_MIN_SHARE = 0.04  # label a bar only when it spans >= 4 % of the window (others: hover)


def chart_rows(window: pd.DataFrame, start_ns: int, max_bars: int) -> pd.DataFrame:
    """The bars of one window: ``lane`` (row label), ``start_ms``, ``dur_ns``, ``name``, ``key`` (palette)."""
    kept = window.nlargest(max_bars, "dur_ns") if len(window) > max_bars else window
    kept = kept.sort_values(["ts_ns", "dur_ns"], ascending=[True, False], kind="stable")
    gpu = kept["kind"].astype(str).isin(GPU_WORK_KINDS).to_numpy()
    parts = []
    for (is_gpu, pid, tid), lane in kept.groupby(
        [gpu, kept["pid"].astype(str), kept["tid"].astype(str)], sort=True
    ):
        ts, dur = lane["ts_ns"].to_numpy(np.int64), lane["dur_ns"].to_numpy(np.int64)
        depth = np.zeros(len(lane), np.int64) if is_gpu else nesting_depth(ts, dur)
        label = f"GPU {pid} stream {tid}" if is_gpu else f"thread {tid}"
        columns = {
            "lane": [f"{label} · {d}" if not is_gpu else label for d in depth.tolist()],
            "order": (1_000_000 if is_gpu else 0) + depth,
            "start_ms": (ts - start_ns) / NS_PER_MS,
            "dur_ns": dur,
            "name": [stage_from_range_name(n) or n for n in lane["name"].astype(str)],
            "key": list(map(kind_key, lane["kind"].astype(str), lane["name"].astype(str))),
        }
        parts.append(pd.DataFrame(columns))
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["lane", "order", "start_ms", "dur_ns", "name", "key"])
    )


def flame_chart_figure(
    window: pd.DataFrame, start_ns: int, *, title: str, max_bars: int = 3_000
) -> go.Figure:
    """Bars per kind (one trace each, palette colors): x = time since ``start_ns`` (ms), y = lane."""
    rows = chart_rows(window, start_ns, max_bars)
    if rows.empty:
        return empty_figure("no events in this request", title)
    lanes = rows.drop_duplicates("lane").sort_values(["order", "lane"])["lane"].tolist()
    fig = go.Figure()
    span_ns = max(int(window["ts_ns"].add(window["dur_ns"]).max()) - start_ns, 1)
    wide = rows["dur_ns"] >= TEXT_MIN_SHARE * span_ns
    rows = rows.assign(text=[n[:TEXT_CHARS] if w else "" for n, w in zip(rows["name"], wide)])
    for key in [k for k in KIND_COLORS if k in set(rows["key"])]:
        part = rows[rows["key"] == key]
        fig.add_bar(
            y=part["lane"].tolist(),
            x=part["dur_ns"].to_numpy() / NS_PER_MS,
            base=part["start_ms"].to_numpy(),
            orientation="h",
            name=KIND_LABELS[key],
            marker=dict(color=KIND_COLORS[key], line=dict(width=0.5, color="#ffffff")),
            text=part["text"].tolist(),
            textposition="inside",
            insidetextanchor="start",
            textangle=0,
            customdata=[
                [n[:HOVER_CHARS], format_ns(d)] for n, d in zip(part["name"], part["dur_ns"])
            ],
            hovertemplate="%{customdata[0]}<br>start %{base:.4f} ms<br>duration %{customdata[1]}"
            f"<extra>{KIND_LABELS[key]}</extra>",
        )
    fig.update_yaxes(
        categoryorder="array", categoryarray=lanes, autorange="reversed", title_text=None
    )
    cut = len(window) - len(rows)
    full = title + (f" ({cut} shortest events not drawn)" if cut > 0 else "")
    return layout(
        fig,
        full,
        barmode="overlay",
        xaxis_title="time since request start (ms)",
        # a lane of LANE_PX under the margins (the height once held the margins too: labels of 5 px)
        height=160 + max(LANE_PX * len(lanes), 160),
        uniformtext=SMALL_LABELS_HIDDEN,
    )


def request_window(events: Trace | pd.DataFrame, request: int) -> tuple[int, int, str]:
    """``(start_ns, end_ns, label)`` of the request-th step (without steps: the whole trace)."""
    bounds = step_boundaries(Trace.of(events))
    if bounds.empty:
        return 0, 0, "none"
    if not -len(bounds) <= request < len(bounds):
        raise ConfigError(
            f"request_flame_chart: request={request}, but the trace has {len(bounds)} step(s)"
        )
    row = bounds.iloc[request]
    label = (
        "whole trace (no ProfilerStep ranges)"
        if row["step"] == "all"
        else f"ProfilerStep#{row['step']}"
    )
    return int(row["start_ns"]), int(row["end_ns"]), label


def request_flame_chart(
    events: Trace | pd.DataFrame,
    *,
    request: int = 0,
    max_bars: int = 3_000,
    title: str | None = None,
) -> go.Figure:
    """Time-axis flame chart of the events starting in the ``request``-th step (0-based)."""
    model = Trace.of(events)
    start, end, label = request_window(model, request)
    events = model.events
    chosen = events[(events["ts_ns"] >= start) & (events["ts_ns"] < end)]
    chosen = chosen[chosen["kind"].isin(GPU_WORK_KINDS + DRAWN_HOST_KINDS).to_numpy()]
    if chosen.empty:
        return empty_figure("no events in this request", title or "Request flame chart")
    head = title or f"Request flame chart: {label}, {format_ns(end - start)}"
    return flame_chart_figure(chosen, start, title=head, max_bars=max_bars)
