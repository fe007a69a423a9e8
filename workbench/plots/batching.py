"""Dynamic batching (:mod:`workbench.batching`): simulated sweeps and summaries, a measured capacity
sweep (``load --sweep``) against the simulator's predictions, and continuous batching's TTFT, ITL
and goodput against throughput.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..batching.capacity import points_table
from ..batching.continuous import POINT_COLUMNS
from ..errors import ConfigError
from .budget import parts_figure
from .style import (
    PERCENTILE_COLORS,
    SLA_COLOR,
    add_sla_line,
    empty_figure,
    layout,
    require_columns,
    stage_color,
    value_axis,
)

SETTING = ("rate_rps", "max_batch_size", "max_wait_ms")  # a sweep row's batcher setting
# where a sweep table with the missing columns comes from
SWEEP_HINT = "workbench.batching.sweep(...)"
COMPONENTS = {
    "batch_wait": ("batch wait", "#dd8452"),
    "queue_wait": ("queue wait", "#c44e52"),
    "service": ("service", "#4c72b0"),
}


def stability_markers(stable: pd.Series) -> dict:
    """Point markers: a circle for a stable row, a larger open "x" for an unstable one."""
    ok = stable.astype(bool).to_numpy()
    return dict(symbol=np.where(ok, "circle", "x-open").tolist(), size=np.where(ok, 7, 10).tolist())


def batching_curves_figure(
    sweep: pd.DataFrame,
    *,
    sla_ms: float | None = None,
    log_y: bool = True,
    title: str | None = None,
) -> go.Figure:
    """Latency (ms) vs achieved throughput (requests/s), one color per (max_batch_size, max_wait_ms):
    p99 solid ("bs=B wait=W ms p99"), p50 dotted; ``sla_ms`` draws the target."""
    needed = (*SETTING, "p50_ms", "p99_ms", "throughput_rps", "stable")
    require_columns(sweep, needed, "batching_curves_figure: sweep is", SWEEP_HINT)
    if sweep.empty:
        return empty_figure("empty sweep: no settings simulated", title or "Latency vs throughput")
    fig = go.Figure()
    groups = sweep.sort_values("rate_rps", kind="stable").groupby(
        ["max_batch_size", "max_wait_ms"], sort=True
    )
    spread = {"p99_lo_ms", "p99_hi_ms"} <= set(sweep.columns)
    for i, ((size, wait), rows) in enumerate(groups):
        name = f"bs={size} wait={wait:g} ms"
        for col, dash in (("p99_ms", "solid"), ("p50_ms", "dot")):
            bars = _seed_range(rows) if spread and col == "p99_ms" else None
            fig.add_scatter(
                error_y=bars,
                x=rows["throughput_rps"].to_numpy(),
                y=rows[col].to_numpy(),
                mode="lines+markers",
                name=f"{name} {col.removesuffix('_ms')}",
                legendgroup=name,
                line=dict(color=stage_color(i), dash=dash),
                marker=stability_markers(rows["stable"]),
                customdata=np.c_[rows["rate_rps"].to_numpy(), rows["stable"].to_numpy()],
                hovertemplate=f"{name}<br>offered %{{customdata[0]:.4g}} req/s<br>throughput "
                f"%{{x:.4g}} req/s<br>{col[:3]} %{{y:.3f}} ms<br>stable %{{customdata[1]}}<extra></extra>",
            )
    if sla_ms is not None:
        add_sla_line(fig, [sweep["throughput_rps"].min(), sweep["throughput_rps"].max()], sla_ms)
    sla = [[float(sla_ms)]] if sla_ms is not None else []
    fig.update_yaxes(**value_axis(log_y, "ms", sweep["p50_ms"], sweep["p99_ms"], *sla))
    seeds = "solid p99 (bars: its range over seeded runs)" if spread else "solid p99"
    return layout(
        fig,
        title or f"Latency vs throughput ({seeds}, dotted p50; x: unstable)",
        xaxis_title="throughput (requests/s)",
        yaxis_title="latency (ms, log scale)" if log_y else "latency (ms)",
        legend="right",
    )


def _seed_range(rows: pd.DataFrame) -> dict:
    """Error bars from the p99 drawn to the seeds' smallest and largest p99 (``seeded_spread``)."""
    p99 = rows["p99_ms"].to_numpy()
    above, below = rows["p99_hi_ms"].to_numpy() - p99, p99 - rows["p99_lo_ms"].to_numpy()
    return dict(type="data", symmetric=False, array=above, arrayminus=below, thickness=1, width=3)


def wait_time_figure(
    sweep: pd.DataFrame,
    *,
    stat: str = "p99_ms",
    rate_rps: float | None = None,
    title: str | None = None,
) -> go.Figure:
    """``stat`` latency (ms) vs ``max_wait_ms``, a line per max_batch_size (and rate)."""
    require_columns(sweep, (*SETTING, stat, "stable"), "wait_time_figure: sweep is", SWEEP_HINT)
    rows = sweep if rate_rps is None else sweep[np.isclose(sweep["rate_rps"], rate_rps)]
    if rows.empty:
        return empty_figure(
            "no sweep rows" + ("" if rate_rps is None else f" at {rate_rps:g} req/s"),
            title or "Latency vs wait time",
        )
    several = rows["rate_rps"].nunique() > 1
    fig = go.Figure()
    groups = rows.sort_values("max_wait_ms", kind="stable").groupby(
        ["rate_rps", "max_batch_size"], sort=True
    )
    for i, ((rate, size), g) in enumerate(groups):
        name = f"bs={size}" + (f" @ {rate:g} req/s" if several else "")
        fig.add_scatter(
            x=g["max_wait_ms"].to_numpy(),
            y=g[stat].to_numpy(),
            mode="lines+markers",
            name=name,
            line=dict(color=stage_color(i)),
            marker=stability_markers(g["stable"]),
            hovertemplate=f"{name}<br>max wait %{{x:g}} ms<br>{stat.removesuffix('_ms')} "
            "%{y:.3f} ms<extra></extra>",
        )
    at = "" if several else f" at {rows['rate_rps'].iloc[0]:g} req/s"
    return layout(
        fig,
        title or f"{stat.removesuffix('_ms')} latency vs max wait{at}",
        legend="right",
        xaxis_title="max wait (ms)",
        yaxis_title=f"{stat.removesuffix('_ms')} latency (ms)",
    )


def queueing_breakdown_figure(
    summary: dict[str, Any] | pd.DataFrame,
    *,
    at: pd.DataFrame | None = None,
    stat: str = "p50_ms",
    title: str | None = None,
) -> go.Figure:
    """Batch wait, queue wait and service (ms), end to end as a marker, of a ``load_summary`` dict
    (means stacked; ``at``: ``batching.summary.percentile_requests``, each request stacked) or of a
    sweep table (each part's ``stat`` side by side: percentiles of parts do not add up)."""
    barmode = "stack"
    if isinstance(summary, dict):
        rows = [] if at is None else list(at.itertuples())
        labels = ["mean", *(f"p{r.percentile:g} request (#{r.request})" for r in rows)]
        parts = {
            c: [summary[c]["mean_ms"], *(getattr(r, f"{c}_ms") for r in rows)] for c in COMPONENTS
        }
        total = [summary["end_to_end"]["mean_ms"], *(r.end_to_end_ms for r in rows)]
    else:
        if stat not in ("p50_ms", "p99_ms"):
            raise ConfigError(
                f"queueing_breakdown_figure: stat={stat!r}; a sweep has p50_ms and p99_ms"
            )
        needed = (*SETTING, stat, *[f"{c}_{stat}" for c in COMPONENTS])
        require_columns(summary, needed, "queueing_breakdown_figure: sweep is", SWEEP_HINT)
        labels = [
            f"{r:g} req/s bs={b} wait={w:g}" for r, b, w in zip(*(summary[c] for c in SETTING))
        ]
        parts = {c: summary[f"{c}_{stat}"].tolist() for c in COMPONENTS}
        total = summary[stat].tolist()
        barmode = "group"
    if not labels or all(v is None for v in total):
        return empty_figure("no completed requests to break down", title or "Queueing breakdown")
    fig = parts_figure(
        labels, [(name, parts[c], color) for c, (name, color) in COMPONENTS.items()], total
    )
    default = (
        "Queueing breakdown: batch wait, queue wait, service"
        if barmode == "stack"
        else f"Queueing breakdown: each part's {stat.removesuffix('_ms')} (side by side: percentiles do not add up)"
    )
    return layout(
        fig, title or default, barmode=barmode, yaxis_title="latency (ms)", xaxis_title=None
    )


PREDICTED_COLOR = "#7f7f7f"


def sweep_figure(
    points: pd.DataFrame,
    *,
    sla_ms: float | None = None,
    knee: int | None = None,
    title: str | None = None,
    log_y: bool = True,
) -> go.Figure:
    """Traces, in order: "p99", "p50" (measured), "sim p99", "sim p50" (when predicted), "SLA S ms", "knee"
    (``knee``: its row position, :func:`workbench.analysis.windows.knee`); x = ``achieved_rps``."""
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
        point = points.iloc[knee]
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
    columns = ["offered_rps", "stable", "predicted_p99_ratio", "predicted_p50_ratio"]
    custom = rows.assign(stable=rows["stable"].astype(bool))[columns].to_numpy(dtype=float)
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


def sweep_record_figure(record: dict, **kwargs) -> go.Figure:
    """:func:`sweep_figure` of a ``sweep.json`` record (its SLA and knee)."""
    points = points_table(record)
    knee = record.get("knee")
    is_knee = points["point"].to_numpy() == (knee or {}).get("point")
    position = None if knee is None else int(np.flatnonzero(is_knee)[0])
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


# generative_figure's (column, panel title); a panel's y axis is its column's unit
PANELS = (("ttft_p99_ms", "TTFT p99 (ms)"), ("itl_p99_ms", "ITL p99 (ms)"), ("goodput", "goodput"))
MEASURED_COLOR = "#dd8452"
CURRENT_COLOR = "#d62728"


def generative_figure(
    curve: pd.DataFrame,
    *,
    measured: pd.DataFrame | None = None,
    current: dict | None = None,
    bounds: dict | None = None,
    title: str | None = None,
) -> go.Figure:
    """TTFT p99, ITL p99 and goodput (0-1) over ``throughput_rps`` of ``simulated_curve``, a panel
    each; traces per panel: "simulated", "measured" (``measured_points`` of live runs, when it has
    rows), "this setting" (``current``: a row of the curve's columns). ``bounds`` ``{"ttft_ms",
    "tpot_ms"}`` draws the TTFT bound on its panel (ITL has none of its own: goodput's TPOT bound is
    a mean over a request's tokens) and names both in the title."""
    require_columns(curve, POINT_COLUMNS, "generative_figure: curve", "simulated_curve(...)")
    if curve.empty:
        return empty_figure("no rate simulated", title or "Continuous batching")
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08)
    for col, (column, label) in enumerate(PANELS, start=1):
        add = partial(fig.add_scatter, showlegend=col == 1, row=1, col=col)  # in the legend once
        add(
            x=curve["throughput_rps"],
            y=curve[column],
            name="simulated",
            legendgroup="simulated",
            customdata=curve["rate_rps"],
            mode="lines+markers",
            line=dict(color=PERCENTILE_COLORS["p99_ms"]),
            hovertemplate=f"%{{customdata:.4g}} req/s offered<br>%{{x:.4g}} req/s<br>{label} %{{y:.4g}}",
        )
        if measured is not None and len(measured):
            add(
                x=measured["throughput_rps"],
                y=measured[column],
                name="measured",
                legendgroup="measured",
                customdata=measured["rate_rps"],
                mode="markers",
                marker=dict(symbol="diamond", size=11, color=MEASURED_COLOR),
                hovertemplate="measured at %{customdata:.4g} req/s<br>%{x:.4g} req/s<br>%{y:.4g}",
            )
        if current is not None:
            add(
                x=[current["throughput_rps"]],
                y=[current[column]],
                name="this setting",
                legendgroup="current",
                mode="markers",
                marker=dict(symbol="star", size=15, color=CURRENT_COLOR),
            )
        # the metric on its axis, not as a subplot title: that row holds the legend
        fig.update_yaxes(title_text=label, row=1, col=col)
    fig.update_yaxes(range=[0, 1.05], row=1, col=3)
    fig.update_xaxes(title_text="throughput (requests/s)")
    default = "Continuous batching, simulated from measured steps"
    if bounds is not None:
        fig.add_hline(y=bounds["ttft_ms"], line=dict(color=SLA_COLOR, dash="dash"), row=1, col=1)
        default += (
            f"<br>goodput: TTFT <= {bounds['ttft_ms']:g} ms and TPOT <= {bounds['tpot_ms']:g} ms"
        )
    return layout(fig, default if title is None else title)
