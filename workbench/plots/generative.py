"""Continuous batching of a generative pipeline: TTFT p99, ITL p99 and goodput against throughput.

Input: :func:`workbench.batching.continuous.simulated_curve` (one row per arrival rate) and,
optionally, :func:`~workbench.batching.continuous.measured_points` of live runs (markers
beside the curve, labelled measured) and the current setting's row (a star).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..batching.continuous import POINT_COLUMNS
from .style import PERCENTILE_COLORS, SLA_COLOR, empty_figure, layout, require_columns

# (column, panel title); a panel's y axis is its column's unit
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
    """Three panels over ``throughput_rps``: TTFT p99, ITL p99, goodput (0-1).

    Traces, per panel: "simulated" (the curve, by rate; hover names the rate), "measured" (when
    ``measured`` has rows), "this setting" (``current``: a row of the curve's columns). ``bounds``
    ``{"ttft_ms": ..., "tpot_ms": ...}`` draws the TTFT bound on its panel (ITL has no bound of its
    own: goodput's TPOT bound is a mean over a request's tokens) and names both in the title.
    """
    require_columns(curve, POINT_COLUMNS, "generative_figure: curve", "simulated_curve(...)")
    if curve.empty:
        return empty_figure("no rate simulated", title or "Continuous batching")
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08)
    for col, (column, label) in enumerate(PANELS, start=1):
        series = _series(fig, col)
        series(
            curve["throughput_rps"],
            curve[column],
            "simulated",
            customdata=curve["rate_rps"],
            mode="lines+markers",
            line=dict(color=PERCENTILE_COLORS["p99_ms"]),
            hovertemplate=f"%{{customdata:.4g}} req/s offered<br>%{{x:.4g}} req/s<br>{label} %{{y:.4g}}",
        )
        if measured is not None and len(measured):
            series(
                measured["throughput_rps"],
                measured[column],
                "measured",
                customdata=measured["rate_rps"],
                mode="markers",
                marker=dict(symbol="diamond", size=11, color=MEASURED_COLOR),
                hovertemplate="measured at %{customdata:.4g} req/s<br>%{x:.4g} req/s<br>%{y:.4g}",
            )
        if current is not None:
            series(
                [current["throughput_rps"]],
                [current[column]],
                "this setting",
                legendgroup="current",
                mode="markers",
                marker=dict(symbol="star", size=15, color=CURRENT_COLOR),
            )
        fig.update_xaxes(title_text="throughput (requests/s)", row=1, col=col)
        # the metric on its axis, not as a subplot title: that row holds the legend
        fig.update_yaxes(title_text=label, row=1, col=col)
    if bounds is not None:
        fig.add_hline(y=bounds["ttft_ms"], line=dict(color=SLA_COLOR, dash="dash"), row=1, col=1)
    fig.update_yaxes(range=[0, 1.05], row=1, col=3)
    if title is None:
        title = "Continuous batching, simulated from measured steps"
        if bounds is not None:
            title += f"<br>goodput: TTFT <= {bounds['ttft_ms']:g} ms and TPOT <= {bounds['tpot_ms']:g} ms"
    return layout(fig, title)


def _series(fig: go.Figure, col: int):
    """``add(x, y, name, **style)``: a scatter on panel ``col``, in the legend once (from panel 1)."""

    def add(x, y, name: str, **style) -> None:
        style.setdefault("legendgroup", name)
        fig.add_scatter(x=x, y=y, name=name, showlegend=col == 1, row=1, col=col, **style)

    return add
