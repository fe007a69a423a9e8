"""A measured capacity sweep (``load --sweep``, :func:`workbench.batching.capacity.points_table`):
latency against achieved throughput, the simulator's predictions in grey, the SLA, the knee.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..batching.capacity import points_table
from .batching import stability_markers
from .style import PERCENTILE_COLORS, SLA_COLOR, add_sla_line, empty_figure, layout, value_axis

PREDICTED_COLOR = "#7f7f7f"


def sweep_figure(
    points: pd.DataFrame,
    *,
    sla_ms: float | None = None,
    knee: int | None = None,
    title: str | None = None,
    log_y: bool = True,
) -> go.Figure:
    """Traces, in order: "p99", "p50" (measured), "sim p99", "sim p50" (when predicted), "SLA S ms", "knee".

    x = ``achieved_rps``; a point at or above the simulator's capacity is a gap in its curve.
    ``knee``: row position of the knee point (:func:`workbench.analysis.windows.knee`).
    """
    if points.empty:
        return empty_figure("empty sweep: no point measured", title or "Latency vs throughput")
    rows = points.sort_values("offered_rps", kind="stable")
    x = rows["achieved_rps"].to_numpy(dtype=float)
    fig = go.Figure()
    _add_measured_curves(fig, rows, x)
    if rows["predicted_p99_ms"].notna().any():
        _add_predicted_curves(fig, rows, x)
    if sla_ms is not None:
        add_sla_line(fig, [x.min(), x.max()], sla_ms)
    if knee is not None:
        _add_knee(fig, points.iloc[knee])
    fig.update_yaxes(**value_axis(log_y, "ms", *(t.y for t in fig.data if t.y is not None)))
    return layout(
        fig,
        title or "Latency vs throughput (solid p99, dotted p50; x: unstable; grey: simulator)",
        xaxis_title="achieved throughput (requests/s)",
        yaxis_title="end-to-end latency (ms)",
        legend="right",
    )


def _add_measured_curves(fig: go.Figure, rows: pd.DataFrame, x: np.ndarray) -> None:
    """Measured p99 (solid) and p50 (dotted), unstable points open; the hover has the measured/simulated ratio."""
    custom = np.c_[
        rows["offered_rps"].to_numpy(dtype=float),
        rows["stable"].astype(bool).to_numpy().astype(int),
        rows["predicted_p99_ratio"].to_numpy(dtype=float),
        rows["predicted_p50_ratio"].to_numpy(dtype=float),
    ]
    for col, dash, k in (("p99_ms", "solid", 2), ("p50_ms", "dot", 3)):
        name = col.removesuffix("_ms")
        fig.add_scatter(
            x=x,
            y=rows[col].to_numpy(dtype=float),
            mode="lines+markers",
            name=name,
            customdata=custom,
            line=dict(color=PERCENTILE_COLORS[col], dash=dash),
            marker=stability_markers(rows["stable"]),
            hovertemplate=f"offered %{{customdata[0]:.4g}} req/s<br>achieved %{{x:.4g}} req/s<br>{name} "
            f"%{{y:.3f}} ms<br>stable %{{customdata[1]}}<br>measured/simulated "
            f"%{{customdata[{k}]:.2f}}<extra></extra>",
        )


def _add_predicted_curves(fig: go.Figure, rows: pd.DataFrame, x: np.ndarray) -> None:
    """The simulator's p99 and p50 in grey, a gap at and above its capacity, marked by a vertical line."""
    over = (rows["predicted_stable"] == False).to_numpy()  # noqa: E712  (None: not said, drawn)
    for col, dash in (("predicted_p99_ms", "dash"), ("predicted_p50_ms", "dashdot")):
        name = "sim " + col.removeprefix("predicted_").removesuffix("_ms")
        fig.add_scatter(
            x=x,
            y=np.where(over, np.nan, rows[col].to_numpy(dtype=float)),
            mode="lines",
            name=name,
            line=dict(color=PREDICTED_COLOR, dash=dash),
            hovertemplate=f"{name} %{{y:.3f}} ms at %{{x:.4g}} req/s<extra></extra>",
        )
    capacity = rows["predicted_capacity_rps"].dropna()
    if over.any() and len(capacity):
        measured = rows[["p50_ms", "p99_ms"]].to_numpy(dtype=float)
        fig.add_scatter(
            x=[float(capacity.iloc[0])] * 2,
            y=[float(np.nanmin(measured)), float(np.nanmax(measured))],
            mode="lines",
            name=f"sim capacity {capacity.iloc[0]:.4g} req/s",
            line=dict(color=PREDICTED_COLOR, dash="dot"),
            hoverinfo="skip",
        )


def _add_knee(fig: go.Figure, point: pd.Series) -> None:
    fig.add_scatter(
        x=[float(point["achieved_rps"])],
        y=[float(point["p99_ms"])],
        mode="markers+text",
        name="knee",
        text=[f"knee {point['offered_rps']:.4g} req/s"],
        textposition="top left",
        marker=dict(symbol="circle-open", size=18, color=SLA_COLOR, line=dict(width=2)),
        hoverinfo="skip",
    )


def sweep_record_figure(record: dict, **kwargs) -> go.Figure:
    """:func:`sweep_figure` of a ``sweep.json`` record (its SLA and knee)."""
    points = points_table(record)
    knee = record.get("knee")
    position = (
        None
        if knee is None
        else int(np.flatnonzero(points["point"].to_numpy() == knee["point"])[0])
    )
    return sweep_figure(points, sla_ms=record["plan"]["sla_ms"], knee=position, **kwargs)


def add_measured(fig: go.Figure, record: dict) -> go.Figure:
    """Add a sweep's measured p99 and p50 ("measured p99"/"measured p50") to a latency-vs-throughput figure."""
    points = points_table(record).sort_values("offered_rps", kind="stable")
    x = points["achieved_rps"].to_numpy(dtype=float)
    stable = points["stable"].astype(bool).to_numpy()
    marker = dict(symbol=np.where(stable, "diamond", "x-open").tolist(), size=9, color="#333333")
    for col, dash in (("p99_ms", "solid"), ("p50_ms", "dot")):
        name = "measured " + col.removesuffix("_ms")
        fig.add_scatter(
            x=x,
            y=points[col].to_numpy(dtype=float),
            mode="lines+markers",
            name=name,
            line=dict(color="#333333", dash=dash, width=1),
            marker=marker,
            hovertemplate=f"{name} %{{y:.3f}} ms at %{{x:.4g}} req/s<extra></extra>",
        )
    return fig
