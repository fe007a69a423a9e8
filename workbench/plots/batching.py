"""Dynamic batching of :mod:`workbench.batching`'s sweeps and summaries: latency vs throughput, p99
vs wait time, the queueing breakdown. Unstable rows (no steady state) have open "x" markers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..errors import ConfigError
from .budget import parts_figure
from .style import add_sla_line, empty_figure, layout, require_columns, stage_color, value_axis

SETTING = ("rate_rps", "max_batch_size", "max_wait_ms")  # a sweep row's batcher setting
COMPONENTS = {
    "batch_wait": ("batch wait", "#dd8452"),
    "queue_wait": ("queue wait", "#c44e52"),
    "service": ("service", "#4c72b0"),
}


def _check(sweep: pd.DataFrame, needed: tuple[str, ...], who: str) -> None:
    require_columns(sweep, needed, f"{who}: sweep is", "workbench.batching.sweep(...)")


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
    _check(sweep, needed, "batching_curves_figure")
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
    return dict(
        type="data",
        symmetric=False,
        array=rows["p99_hi_ms"].to_numpy() - p99,
        arrayminus=p99 - rows["p99_lo_ms"].to_numpy(),
        thickness=1,
        width=3,
    )


def wait_time_figure(
    sweep: pd.DataFrame,
    *,
    stat: str = "p99_ms",
    rate_rps: float | None = None,
    title: str | None = None,
) -> go.Figure:
    """``stat`` latency (ms) vs ``max_wait_ms``, a line per max_batch_size (and rate, when several;
    ``rate_rps`` keeps only that one)."""
    _check(sweep, (*SETTING, stat, "stable"), "wait_time_figure")
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
    """Batch wait, queue wait and service (ms), end to end as a marker.

    ``summary``: a ``load_summary`` dict (the means stacked; with ``at``,
    ``batching.summary.percentile_requests``, also the requests at p50 and p99, each stacked), or
    a sweep table: each part's ``stat`` side by side, since percentiles of parts do not add up.
    """
    barmode = "stack"
    if isinstance(summary, dict):
        labels = ["mean"]
        parts = {c: [summary[c]["mean_ms"]] for c in COMPONENTS}
        total = [summary["end_to_end"]["mean_ms"]]
        if at is not None:
            for row in at.itertuples():
                labels.append(f"p{row.percentile:g} request (#{row.request})")
                for c in COMPONENTS:
                    parts[c].append(getattr(row, f"{c}_ms"))
                total.append(row.end_to_end_ms)
    else:
        if stat not in ("p50_ms", "p99_ms"):
            raise ConfigError(
                f"queueing_breakdown_figure: stat={stat!r}; a sweep has p50_ms and p99_ms"
            )
        needed = (*SETTING, stat, *[f"{c}_{stat}" for c in COMPONENTS])
        _check(summary, needed, "queueing_breakdown_figure")
        labels = [
            f"{r:g} req/s bs={b} wait={w:g}" for r, b, w in zip(*(summary[c] for c in SETTING))
        ]
        parts = {c: summary[f"{c}_{stat}"].tolist() for c in COMPONENTS}
        total = summary[stat].tolist()
        barmode = "group"
    if not labels or all(v is None for v in total):
        return empty_figure("no completed requests to break down", title or "Queueing breakdown")
    fig = parts_figure(
        labels, {name: (parts[c], color) for c, (name, color) in COMPONENTS.items()}, total
    )
    default = (
        "Queueing breakdown: batch wait, queue wait, service"
        if barmode == "stack"
        else f"Queueing breakdown: each part's {stat.removesuffix('_ms')} (side by side: percentiles do not add up)"
    )
    return layout(
        fig, title or default, barmode=barmode, yaxis_title="latency (ms)", xaxis_title=None
    )
