"""Tail figures: which stages the slowest requests spend their time in, latency over the run, and
the stages of one request (clicked in the latency-over-run chart)."""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..analysis.attributes import ATTR_PREFIX
from ..analysis.tail import stage_matrix
from ..analysis.stats import percentiles
from ..units import NS_PER_MS, ns_to_ms
from .style import ABOVE, empty_figure, layout, stage_color

# the headline's line length (12 px text right of a 130 px margin): one line ran off a 640 px figure
NOTE_CHARS = 75
GL_ABOVE_POINTS = 2_000  # latency over the run: SVG markers up to this many points, WebGL above
SET_LABELS = {
    "median": "median set (p40-p60)",
    "slowest_5pct": "slowest 5 %",
    "slowest_1pct": "slowest 1 %",
}


def tail_figure(tail: dict[str, Any], *, title: str | None = None) -> go.Figure:
    """Each stage's share of the median and tail sets' time (``analysis.tail.tail_attribution``)."""
    sets = [k for k in SET_LABELS if (tail.get("sets") or {}).get(k)]
    if not sets:
        return empty_figure("no successful measured request to attribute", title)
    fig = go.Figure()
    for i, row in enumerate(tail["stages"]):
        values = [tail["sets"][k]["shares"][row["name"]] for k in sets]
        fig.add_bar(
            y=[SET_LABELS[k] for k in sets],
            x=values,
            name=row["name"],
            orientation="h",
            marker_color="#bbbbbb" if row["name"] == "unattributed" else stage_color(i),
            text=[f"{v:.0%}" if v >= 0.04 else "" for v in values],
            textposition="inside",
            hovertemplate=f"{row['name']}: %{{x:.1%}} of %{{y}}'s time<extra></extra>",
        )
    parts = [tail.get("headline") or "", *(tail.get("notes") or [])]
    # each part on its own lines, wrapped between words (never inside "5 %": the space is kept unbreakable)
    lines = [
        line.replace("\u00a0", " ")
        for part in parts
        if part
        for line in textwrap.wrap(part.replace(" %", "\u00a0%"), NOTE_CHARS)
    ]
    fig.update_layout(barmode="stack", xaxis={"tickformat": ".0%", "range": [0, 1]})
    # the headline under the title, its lines growing upwards from just above the plot
    note = dict(text="<br>".join(lines), y=1.02, align="left", font={"size": 12}, **ABOVE)
    extra = {"annotations": [note]} if lines else {}
    legend = dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0, traceorder="normal")
    return layout(
        fig,
        # what the axis measures is in the title: an axis title sat under the legend below the plot
        title or "Where the tail's time goes (share of each set's time)",
        legend=legend,
        margin={"l": 130, "r": 20, "t": 60 + 16 * max(len(lines), 1), "b": 90},
        **extra,
    )


def latency_over_run_figure(
    requests: pd.DataFrame,
    *,
    picked: int | None = None,
    title: str | None = None,
    max_points: int = 20_000,
) -> go.Figure:
    """End to end of each request in order (ms), warm-up and failures marked (drift and spikes a
    histogram hides); ``customdata`` is the request id; ``picked``: a request to ring (last trace)."""
    if requests.empty:
        return empty_figure("no requests", title)
    req = requests.sort_values("request")
    if len(req) > max_points:  # keep every slow request, thin the rest evenly
        keep = np.zeros(len(req), bool)
        keep[:: max(1, len(req) // max_points)] = True
        keep |= req["dur_ns"].to_numpy() >= percentiles(req["dur_ns"], 99)
        req = req[keep]
    fig = go.Figure()
    # WebGL only where SVG would be slow: a WebGL context is slow to start without a GPU
    add = fig.add_scattergl if len(req) > GL_ABOVE_POINTS else fig.add_scatter
    groups = (
        ("measured", ~req["warmup"] & req["ok"], "#1f77b4"),
        ("warm-up", req["warmup"] & req["ok"], "#aaaaaa"),
        ("failed", ~req["ok"], "#d62728"),
    )
    for name, mask, color in groups:
        part = req[mask.to_numpy()]
        if part.empty:
            continue
        add(
            x=part["request"],
            y=ns_to_ms(part["dur_ns"]),
            mode="markers",
            name=name,
            marker={"color": color, "size": 4},
            customdata=part["request"],
            hovertemplate="request %{customdata}: %{y:.3f} ms<extra>" + name + "</extra>",
        )
    ring = requests[requests["request"] == picked] if picked is not None else requests.iloc[:0]
    if not ring.empty:  # the picked request, ringed: a trace named "request N"
        fig.add_scatter(
            x=[int(picked)],
            y=[ns_to_ms(int(ring["dur_ns"].iloc[0]))],
            customdata=[int(picked)],
            mode="markers",
            name=f"request {picked}",
            marker={"symbol": "circle-open", "size": 16, "color": "#d62728", "line": {"width": 2}},
            hovertemplate="request %{customdata}: %{y:.3f} ms<extra>picked</extra>",
        )
    fig.update_layout(xaxis_title="request (in order)", yaxis_title="end to end (ms)")
    return layout(fig, title or "Latency over the run")


def attribute_figure(
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    stage: str,
    attribute: str,
    *,
    effect: dict[str, Any] | None = None,
    title: str | None = None,
    max_points: int = 20_000,
) -> go.Figure:
    """Stage time (ms) against a ``describe=`` attribute, a point per successful measured request;
    ``effect`` (:func:`workbench.analysis.attributes.attribute_effects`): its bins' p50 and p99."""
    column = ATTR_PREFIX + attribute
    if column not in requests.columns:
        return empty_figure(
            f"no attribute {attribute!r} recorded (declare describe= on a stage)", title
        )
    wide = stage_matrix(requests, stages, [s for s in dict.fromkeys(stages["stage"])])
    if stage not in wide.columns:
        return empty_figure(f"no stage {stage!r} in this run", title)
    x = pd.to_numeric(requests.set_index("request")[column].reindex(wide.index), errors="coerce")
    both = pd.DataFrame({"x": x, "y": ns_to_ms(wide[stage])}).dropna()
    if both.empty:
        return empty_figure(f"no request with both {stage} and {attribute}", title)
    both = both.iloc[:: max(1, len(both) // max_points)]
    fig = go.Figure()
    fig.add_scattergl(
        x=both["x"],
        y=both["y"],
        mode="markers",
        marker={"size": 5, "opacity": 0.6},
        customdata=both.index,
        name=stage,
        hovertemplate=f"request %{{customdata}}<br>{attribute} %{{x:g}}<br>{stage} %{{y:.3f}} ms<extra></extra>",
    )
    bins = (effect or {}).get("bins") or []
    xs = [x for b in bins for x in (b["lo"], b["hi"], None)]
    for key, dash in (("p50_ms", "solid"), ("p99_ms", "dot")):
        if bins:
            ys = [y for b in bins for y in (b[key], b[key], None)]
            fig.add_scatter(
                x=xs, y=ys, mode="lines+markers", name=f"{key[:3]} per range", line={"dash": dash}
            )
    fig.update_layout(xaxis_title=attribute, yaxis_title=f"{stage} (ms)")
    return layout(fig, title or _attribute_title(stage, attribute, effect or {}))


def _attribute_title(stage: str, attribute: str, effect: dict[str, Any]) -> str:
    rho, ci = effect.get("rho"), effect.get("rho_ci")
    if effect.get("effect") is not None:
        rho_text = f", Spearman rho {rho:.2f}" if rho is not None else ""
        return f"{stage} against {attribute}: p50 {effect['effect']:.3g}x from the bottom range to the top{rho_text}"
    if rho is not None and ci:
        return f"{stage} tracks {attribute}: Spearman rho {rho:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"
    return f"{stage} against {attribute}"


TITLE = "Stages of one request"
UNATTRIBUTED_COLOR = "#bbbbbb"


def request_stages_figure(
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    stage_order: list[str] | tuple[str, ...],
    request: int | None,
) -> go.Figure:
    """Horizontal bars (ms) of one request's stages (summed per name) in pipeline order, then
    ``unattributed``: end to end minus the stages, never hidden."""
    if request is None:
        return empty_figure("no measured request to break down", TITLE)
    row = requests[requests["request"] == request]
    if row.empty:
        return empty_figure(f"no request {request} in this run", TITLE)
    durations = stages[stages["request"] == request].groupby("stage", sort=False)["dur_ns"].sum()
    e2e_ns = int(row["dur_ns"].iloc[0])
    names = [s for s in stage_order if s in durations.index]
    values_ns = [int(durations[s]) for s in names]
    values_ns.append(e2e_ns - sum(values_ns))  # unattributed: end to end minus the stages
    fig = go.Figure(
        go.Bar(
            x=[v / NS_PER_MS for v in values_ns],
            y=[*names, "unattributed"],
            orientation="h",
            marker_color=[stage_color(i) for i in range(len(names))] + [UNATTRIBUTED_COLOR],
            hovertemplate="%{y}: %{x:.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(xaxis_title="ms", yaxis={"autorange": "reversed"})
    return layout(fig, f"Stages of request {request}: {e2e_ns / NS_PER_MS:.3f} ms end to end")
