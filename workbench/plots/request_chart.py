"""A time-axis flame chart of one traced request: host calls stacked by depth, GPU work per stream.
Only the ``max_bars`` longest events are drawn (a parent is never shorter than its child, so the
kept bars still nest); the title says how many were left out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..trace import Trace
from ..analysis.nesting import nesting_depth  # the flame tree's rule; used below
from ..analysis.steps import step_boundaries
from ..errors import ConfigError
from ..naming import stage_from_range_name
from ..trace import GPU_WORK_KINDS, HOST_KINDS, KIND_SYNC
from ..units import NS_PER_MS
from .style import KIND_COLORS, KIND_LABELS, empty_figure, format_ns, kind_key, layout

DRAWN_HOST_KINDS = (*HOST_KINDS, KIND_SYNC)  # host rows: the flame tree's host kinds, sync waits
TEXT_CHARS = 40
HOVER_CHARS = 160
LANE_PX = 26  # a lane's height: its bar (80 %) holds a 12 px label
MIN_LABEL_PX = 10
TEXT_MIN_SHARE = 0.04  # label a bar only when it spans >= 4 % of the window (others: hover)


def chart_rows(window: pd.DataFrame, start_ns: int, max_bars: int) -> pd.DataFrame:
    """The bars of one window: ``lane`` (row label), ``start_ms``, ``dur_ms``, ``name``, ``key`` (palette)."""
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
        parts.append(
            pd.DataFrame(
                {
                    "lane": [f"{label} · {d}" if not is_gpu else label for d in depth.tolist()],
                    "order": (1_000_000 if is_gpu else 0) + depth,
                    "start_ms": (ts - start_ns) / NS_PER_MS,
                    "dur_ms": dur / NS_PER_MS,
                    "dur_ns": dur,
                    "name": [stage_from_range_name(n) or n for n in lane["name"].astype(str)],
                    "key": [
                        kind_key(k, n)
                        for k, n in zip(lane["kind"].astype(str), lane["name"].astype(str))
                    ],
                }
            )
        )
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["lane", "order", "start_ms", "dur_ms", "dur_ns", "name", "key"])
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
    wide = rows["dur_ns"] >= TEXT_MIN_SHARE * max(
        int(window["ts_ns"].add(window["dur_ns"]).max()) - start_ns, 1
    )
    rows = rows.assign(text=[n[:TEXT_CHARS] if w else "" for n, w in zip(rows["name"], wide)])
    for key in [k for k in KIND_COLORS if k in set(rows["key"])]:
        part = rows[rows["key"] == key]
        fig.add_bar(
            y=part["lane"].tolist(),
            x=part["dur_ms"].to_numpy(),
            base=part["start_ms"].to_numpy(),
            orientation="h",
            name=KIND_LABELS[key],
            marker=dict(color=KIND_COLORS[key], line=dict(width=0.5, color="#ffffff")),
            text=part["text"].tolist(),
            textposition="inside",
            insidetextanchor="start",
            textangle=0,
            customdata=[
                [n[:HOVER_CHARS], format_ns(d)]
                for n, d in zip(part["name"], part["dur_ns"].tolist())
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
        uniformtext=dict(
            minsize=MIN_LABEL_PX, mode="hide"
        ),  # a bar too thin for its label shows none
    )


def request_window(events: Trace | pd.DataFrame, request: int) -> tuple[int, int, str]:
    """``(start_ns, end_ns, label)`` of the request-th step (TensorBoard's step boundaries; without
    steps the whole trace); ConfigError for a request out of range."""
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
    """Time-axis flame chart of the events starting in the ``request``-th step (0-based); x = ms
    since the window start, one bar trace per kind."""
    model = Trace.of(events)
    start, end, label = request_window(model, request)
    events = model.events
    chosen = events[(events["ts_ns"] >= start) & (events["ts_ns"] < end)]
    chosen = chosen[chosen["kind"].isin(GPU_WORK_KINDS + DRAWN_HOST_KINDS).to_numpy()]
    if chosen.empty:
        return empty_figure("no events in this request", title or "Request flame chart")
    head = title or f"Request flame chart: {label}, {format_ns(end - start)}"
    return flame_chart_figure(chosen, start, title=head, max_bars=max_bars)
