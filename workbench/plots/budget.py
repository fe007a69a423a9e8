"""The latency budget figure of :func:`workbench.analysis.budget.stage_summary`, with the SLA line.

Stage percentiles do not add up to the end-to-end one (the slowest requests of two stages are
rarely the same), so they stand side by side; means and one request's stages add up and are stacked.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..analysis.budget import (
    END_TO_END,
    UNATTRIBUTED,
    failure_summary,
    noise_summary,
    percentile_request_parts,
    stage_summary,
)
from ..errors import ConfigError
from ..record.meta import profile_part
from .style import (
    END_TO_END_COLOR,
    PERCENTILE_COLORS,
    SLA_COLOR,
    add_bars,
    empty_figure,
    layout,
    require_columns,
    stage_color,
    title_pad,
)

PERCENTILES = ("p50_ms", "p95_ms", "p99_ms")
NEEDED = ("name", "kind", "count", "mean_ms", *PERCENTILES, "share")
MODES = ("percentiles", "waterfall", "requests")


def check_summary(summary: pd.DataFrame, what: str = "summary") -> None:
    """Raise ConfigError unless ``summary`` has the stage_summary columns."""
    require_columns(summary, NEEDED, f"{what}:", "workbench.analysis.budget.stage_summary(...)")


def budget_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """Stages in pipeline order, then unattributed, then end to end (the bar order)."""
    stages = summary[summary["kind"] == "stage"]
    tail = [summary[summary["name"] == name] for name in (UNATTRIBUTED, END_TO_END)]
    return pd.concat([stages, *tail], ignore_index=True)


def budget_figure(
    summary: pd.DataFrame,
    *,
    sla_ms: float | None = None,
    title: str | None = None,
    mode: str = "percentiles",
    noise: dict | None = None,
    failures: dict | None = None,
    at: pd.DataFrame | None = None,
    tail: str | None = None,
) -> go.Figure:
    """Per-stage latency budget as bars (ms), with each stage's share of the end-to-end mean.

    ``mode``: ``"percentiles"`` (p50/p95/p99 bars side by side), ``"waterfall"`` (means stacked)
    or ``"requests"`` (``at``, ``analysis.budget.percentile_request_parts`` of the run: one stack
    per percentile request, end to end a marker). ``sla_ms`` draws the end-to-end p99 target and the
    title says whether p99 meets it. ``noise`` adds the badge, ``failures`` a line per failing
    stage and ``tail`` the sampled stacks' one-liner under the title.
    """
    check_summary(summary)
    if mode not in MODES:
        raise ConfigError(f"budget_figure: mode={mode!r}; use one of {MODES}")
    if mode == "requests" and at is None:
        raise ConfigError(
            "budget_figure: mode='requests' needs at=analysis.budget.percentile_request_parts(run)"
        )
    rows = budget_rows(summary)
    if rows.empty or not (rows["count"] > 0).any():
        why = "every measured request failed" if failures else "no measured requests in this run"
        head = title or "Latency budget"
        fig = empty_figure("<br>".join([why, *failure_lines(failures)]), head)
        return _header(fig, head, noise, legend_row=False)
    if mode == "requests":
        fig = _request_stacks(rows, at)
    else:
        fig = _percentile_bars(rows) if mode == "percentiles" else _waterfall(rows)
    if sla_ms is not None:
        fig.add_hline(
            y=float(sla_ms),
            line=dict(color=SLA_COLOR, dash="dash", width=2),
            annotation_text=f"SLA {sla_ms:g} ms",
            annotation_position="top left",
        )
    head = title or _title(rows, sla_ms)
    lines = failure_lines(failures) + ([f"tail: {tail}"] if tail else [])
    if lines:
        head += "<br><sup>" + "<br>".join(lines) + "</sup>"
    xaxis_title = "request (rank of end to end)" if mode == "requests" else "stage"
    # a stage per legend entry: a column right of the plot (in a row they ran past the figure's edge)
    legend = {"legend": "right"} if mode == "requests" else {}
    fig = layout(fig, head, yaxis_title="latency (ms)", xaxis_title=xaxis_title, **legend)
    return _header(fig, head, noise, legend_row=not legend)


def _header(fig: go.Figure, head: str, noise: dict | None, legend_row: bool) -> go.Figure:
    """Stack the header in the top margin: the noise badge (if any), title and lines, legend row."""
    badge = []
    if noise is not None:  # each reason wrapped at BADGE_CHARS
        badge = [
            line
            for part in noise_badge_text(noise).split("<br>")
            for line in textwrap.wrap(part, BADGE_CHARS)
        ]
        color = NOISE_COLORS[noise.get("noisy")]
        fig.add_annotation(
            text="<br>".join(badge),
            x=1,
            y=1,
            xref="paper",
            yref="paper",
            xanchor="right",
            yanchor="top",  # raised to the figure's top below
            showarrow=False,
            align="right",
            font=dict(color="white", size=11),
            bgcolor=color,
            bordercolor=color,
            borderpad=BADGE_PAD_PX,
            name="noise",
        )
    badge_px = BADGE_LINE_PX * len(badge) + 2 * BADGE_PAD_PX + 6 if badge else 0
    title_px = TITLE_LINE_PX + SUB_LINE_PX * head.count("<br>")
    top = 10 + badge_px + title_px + (LEGEND_ROW_PX if legend_row else 0)
    fig.update_layout(title_pad_t=title_pad(head, 10 + badge_px), margin_t=top)
    fig.update_annotations(selector=dict(name="noise"), yshift=top - 10)  # from the plot's top edge
    return fig


def run_budget_figure(run, **kwargs) -> go.Figure:
    """:func:`budget_figure` of a run, with its noise badge, failures and the sampled stacks' tail line."""
    if kwargs.get("mode") == "requests" and kwargs.get("at") is None:
        kwargs["at"] = percentile_request_parts(run)
    kwargs.setdefault("tail", (profile_part(run.meta).stacks or {}).get("headline"))
    return budget_figure(
        stage_summary(run),
        noise=noise_summary(run.meta),
        failures=failure_summary(run.requests, run.stage_names),
        **kwargs,
    )


def failure_lines(failures: dict | None) -> list[str]:
    """One line per failing stage: ``failed in forward: 3 (50.0 %), MemoryError: out of memory (x3)``."""
    out = []
    for stage, entry in (failures or {}).items():
        share = f" ({entry['share'] * 100:.1f} %)" if entry.get("share") is not None else ""
        top = entry["messages"][0] if entry.get("messages") else None
        what = f", {top['type']}: {str(top['message'])[:80]} (x{top['count']})" if top else ""
        out.append(f"failed in {stage}: {entry['count']}{share}{what}")
    return out


NOISE_COLORS = {True: "#c62828", False: "#2e7d32", None: "#757575"}
# The header's heights (px): the badge's 11 px lines, the 17 px title and its <sup> lines, a legend row
BADGE_CHARS, BADGE_LINE_PX, BADGE_PAD_PX = 90, 14, 4
TITLE_LINE_PX, SUB_LINE_PX, LEGEND_ROW_PX = 26, 16, 34


def noise_badge_text(noise: dict | None) -> str:
    """The badge: ``NOISY: reasons``, ``quiet machine`` or ``noise not measured``."""
    if not noise or noise.get("noisy") is None:
        reason = "; ".join((noise or {}).get("reasons") or [])
        return "noise not measured" + (f": {reason}" if reason else "")
    if noise["noisy"]:
        return "NOISY: " + "<br>".join(noise.get("reasons") or [])
    return "quiet machine"


def _share_text(rows: pd.DataFrame) -> list[str]:
    return ["" if pd.isna(s) else f"{100 * s:.1f}%" for s in rows["share"]]


def _percentile_bars(rows: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    names = rows["name"].tolist()
    share = _share_text(rows)
    for col in PERCENTILES:
        fig.add_bar(
            x=names,
            y=pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype="float64"),
            name=col.removesuffix("_ms"),
            marker_color=PERCENTILE_COLORS[col],
            customdata=list(zip(share, rows["count"].tolist())),
            hovertemplate=f"%{{x}}<br>{col[:3]} %{{y:.3f}} ms<br>share of mean %{{customdata[0]}}"
            "<br>n=%{customdata[1]}<extra></extra>",
        )
    fig.update_layout(
        barmode="group", legend_title_text="each stage's own (side by side: they do not add up)"
    )
    # the share under each name, short: "forward<br>90.8% of mean" overlapped its neighbours at half of 1280 px
    fig.update_xaxes(
        tickvals=names,
        ticktext=[f"{n}<br>{s}" if s else n for n, s in zip(names, share)],
        title_text="stage (share of the end-to-end mean)",
    )
    return fig


def _waterfall(rows: pd.DataFrame) -> go.Figure:
    parts = rows[rows["name"] != END_TO_END]
    total = rows[rows["name"] == END_TO_END]
    means = pd.to_numeric(parts["mean_ms"], errors="coerce").fillna(0.0).tolist()
    return go.Figure(
        go.Waterfall(
            x=[*parts["name"], END_TO_END],
            y=[*means, float(total["mean_ms"].iloc[0] or 0.0)],
            measure=["relative"] * len(means) + ["total"],
            text=[*_share_text(parts), "100%"],
            textposition="outside",
            name="mean",
            connector=dict(line=dict(color="#999999")),
            increasing=dict(marker=dict(color=stage_color(0))),
            totals=dict(marker=dict(color=END_TO_END_COLOR)),
            hovertemplate="%{x}<br>mean %{y:.3f} ms (%{text})<extra></extra>",
        )
    )


def _request_stacks(rows: pd.DataFrame, at: pd.DataFrame) -> go.Figure:
    """One stacked bar per percentile request: its stages and unattributed (ms), end to end as a marker."""
    parts = rows[rows["name"] != END_TO_END]["name"].tolist()
    needed = ("percentile", "request", *parts, END_TO_END)
    require_columns(
        at, needed, "budget_figure: at is", "analysis.budget.percentile_request_parts(run)"
    )
    labels = [f"p{q:g} request (#{r})" for q, r in zip(at["percentile"], at["request"])]
    bars = [
        (n, at[n], "#bbbbbb" if n == UNATTRIBUTED else stage_color(i)) for i, n in enumerate(parts)
    ]
    fig = parts_figure(labels, bars, at[END_TO_END])
    fig.update_layout(barmode="stack", legend_title_text="this request's own stages (they add up)")
    return fig


def parts_figure(labels: list[str], parts: list[tuple], end_to_end) -> go.Figure:
    """A bar per part over ``labels`` (``parts``: (name, values in ms, color)), end to end (ms) a
    line marker on each label; the caller stacks or groups the bars."""
    fig = go.Figure()
    add_bars(fig, labels, parts)
    fig.add_scatter(
        x=labels,
        y=np.array(end_to_end, dtype=float),
        mode="markers",
        name="end to end",
        marker=dict(symbol="line-ew-open", size=28, line=dict(width=3, color=END_TO_END_COLOR)),
        hovertemplate="%{x}<br>end to end %{y:.3f} ms<extra></extra>",
    )
    return fig


def _title(rows: pd.DataFrame, sla_ms: float | None) -> str:
    e2e = rows[rows["name"] == END_TO_END]
    p99 = e2e["p99_ms"].iloc[0] if len(e2e) else None
    n = int(e2e["count"].iloc[0]) if len(e2e) else 0
    head = f"Latency budget (n={n} requests)"
    if p99 is None or pd.isna(p99):
        return head
    head += f": end-to-end p99 {p99:.2f} ms"
    if sla_ms is not None:
        verdict = "within" if p99 <= sla_ms else "OVER"
        head += f", {verdict} the {sla_ms:g} ms SLA"
    return head
