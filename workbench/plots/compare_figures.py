"""Two runs side by side: per-stage values of each and the deltas B - A, or the ratio B/A (stages
matched by name); and the run on screen beside the runs it is read against (:func:`beside_figure`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .budget import PERCENTILES, budget_rows, check_summary
from .style import FASTER_COLOR, PERCENTILE_COLORS, SLOWER_COLOR, add_bars, empty_figure, layout

SIDE_COLORS = ("#8c8c8c", "#4c72b0")


def compare_table(summary_a: pd.DataFrame, summary_b: pd.DataFrame) -> pd.DataFrame:
    """One row per name (A's bar order, then B-only names): ``<col>_a``, ``<col>_b``, ``<col>_delta`` for p50/p95/p99."""
    a, b = budget_rows(summary_a).set_index("name"), budget_rows(summary_b).set_index("name")
    names = [*a.index, *[n for n in b.index if n not in a.index]]
    out = pd.DataFrame({"name": names})
    for col in ("mean_ms", *PERCENTILES):
        va = pd.to_numeric(a[col].reindex(names), errors="coerce").to_numpy(dtype="float64")
        vb = pd.to_numeric(b[col].reindex(names), errors="coerce").to_numpy(dtype="float64")
        out[f"{col}_a"], out[f"{col}_b"], out[f"{col}_delta"] = va, vb, vb - va
    return out


def compare_figure(
    summary_a: pd.DataFrame,
    summary_b: pd.DataFrame,
    *,
    labels: tuple[str, str] = ("A", "B"),
    stat: str = "p99_ms",
    title: str | None = None,
) -> go.Figure:
    """Top: ``stat`` (ms) per stage for A and B. Bottom: B - A (ms) for p50/p95/p99, the relative
    change as text, outlined red where slower, green where faster."""
    check_summary(summary_a, "summary_a")
    check_summary(summary_b, "summary_b")
    table = compare_table(summary_a, summary_b)
    if table.empty:
        return empty_figure("no stages to compare", title or "Comparison")
    titles = (f"{stat.removesuffix('_ms')} per stage", f"change {labels[1]} - {labels[0]}")
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=titles
    )
    names = table["name"].tolist()
    sides = [(label, table[f"{stat}_{s}"], c) for s, label, c in zip("ab", labels, SIDE_COLORS)]
    add_bars(fig, names, sides, legendgroup="runs", row=1, col=1)
    _add_deltas(fig, table)
    # a label that would shrink under 10 px inside its bar is left to the hover (9.0, 6.9 px seen)
    fig.update_layout(barmode="group", uniformtext=dict(minsize=10, mode="hide"))
    fig.update_yaxes(title_text="latency (ms)", row=1, col=1)
    fig.update_yaxes(
        title_text="Δ latency (ms)", zeroline=True, zerolinecolor="#444444", row=2, col=1
    )
    return layout(fig, title or _title(table, labels))


def _add_deltas(fig: go.Figure, table: pd.DataFrame) -> None:
    """Bottom: B - A (ms) per stage for p50/p95/p99, outlined red where slower, green where faster."""
    names = table["name"].tolist()
    for col in PERCENTILES:
        delta = table[f"{col}_delta"].to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            relative = delta / table[f"{col}_a"].to_numpy()
        outline = [SLOWER_COLOR if d > 0 else FASTER_COLOR for d in np.nan_to_num(delta)]
        fig.add_bar(
            x=names,
            y=delta,
            name=f"Δ {col.removesuffix('_ms')}",
            marker_color=PERCENTILE_COLORS[col],
            marker_line=dict(color=outline, width=2),
            text=["" if not np.isfinite(r) else f"{100 * r:+.1f}%" for r in relative],
            textangle=-90,  # upright, three neighbours' labels ran together ("+475.9%+426.0%+366.3%")
            legendgroup="delta",
            hovertemplate=f"%{{x}}<br>Δ {col[:3]} %{{y:+.3f}} ms (%{{text}})<extra></extra>",
            row=2,
            col=1,
        )


def _title(table: pd.DataFrame, labels: tuple[str, str]) -> str:
    e2e = table[table["name"] == "end_to_end"]
    a, b = (float(e2e[col].iloc[0]) if len(e2e) else np.nan for col in ("p99_ms_a", "p99_ms_b"))
    if not (np.isfinite(a) and np.isfinite(b)):
        return f"{labels[0]} vs {labels[1]}"
    change = f" ({100 * (b - a) / a:+.1f}%)" if a else ""
    return f"{labels[0]} vs {labels[1]}: end-to-end p99 {a:.2f} -> {b:.2f} ms{change}"


VERDICT_COLORS = {
    "slower": SLOWER_COLOR,
    "faster": FASTER_COLOR,
    "no detectable difference": "#7f7f7f",
    "too noisy to tell": "#ff9f1c",
}


def ratio_figure(result: dict, metric: str = "p50", title: str | None = None) -> go.Figure:
    """Ratio B/A of ``metric`` per stage with its interval, of ``workbench compare --json``."""
    comps = result.get("comparisons") or [
        {"b": 1, "stages": result.get("stages", []), "end_to_end": result.get("end_to_end")}
    ]
    labels = [c.get("label", str(i)) for i, c in enumerate(result.get("configs", []))]
    fig = go.Figure()
    for comp in comps:
        entries = [
            *comp.get("stages", []),
            *([comp["end_to_end"]] if comp.get("end_to_end") else []),
        ]
        if not entries:
            continue
        names = ["end to end" if e["name"] == "end_to_end" else e["name"] for e in entries]
        ratio = [_nan(e.get(f"{metric}_ratio")) for e in entries]
        lo, hi = ([_nan(e.get(f"{metric}_ci", [None, None])[i]) for e in entries] for i in (0, 1))
        above, below = np.subtract(hi, ratio).tolist(), np.subtract(ratio, lo).tolist()
        verdicts = [e.get("verdict", "") for e in entries]
        colors = [VERDICT_COLORS.get(v, "#333333") for v in verdicts]
        b = comp.get("b", 1)
        name = f"{labels[b] if b < len(labels) else 'B'} / {labels[0] if labels else 'A'}"
        fig.add_scatter(
            x=names,
            y=ratio,
            mode="markers",
            name=name,
            text=verdicts,
            marker=dict(size=11, color=colors, line=dict(color="#333333", width=1)),
            error_y=dict(
                type="data", symmetric=False, array=above, arrayminus=below, color="#555555"
            ),
            hovertemplate=f"%{{x}}<br>{metric} ratio %{{y:.3f}}<br>%{{text}}<extra>{name}</extra>",
        )
    if not fig.data:
        return empty_figure("nothing was compared", title or "Comparison")
    effect = float(result.get("min_effect") or 0.0)
    fig.add_hrect(y0=1 - effect, y1=1 + effect, fillcolor="#bbbbbb", opacity=0.3, line_width=0)
    fig.add_hline(y=1.0, line=dict(color="#444444", dash="dash"))
    fig.update_yaxes(title_text=f"{metric} ratio B/A (interval)")
    kind = "separate runs" if result.get("kind") == "separate runs" else "interleaved"
    return layout(fig, title or f"{metric} ratio per stage, {kind}, with intervals")


def _nan(x) -> float:
    return float("nan") if x is None else float(x)


NOW_COLOR = PERCENTILE_COLORS["p99_ms"]
OTHER_COLOR = "#8c8c8c"


def beside_figure(table: pd.DataFrame, title: str | None = None) -> go.Figure:
    """End-to-end p50 and p99 (with its 95 % interval) of ``widgets.summaries.beside_table``'s runs, a
    busy machine's in red. Traces, in order: ``p99 (95 % CI)`` and ``p50``."""
    rows = table.to_dict("records")
    notes = ["; ".join(n for n in _notes(r) if n) for r in rows]
    # a run's notes go under its name on the axis: text beside the last point ran out of the figure
    x = [
        f"{r['role']}: {r['configuration']} ({r['source']})" + (f"<br><i>{n}</i>" if n else "")
        for r, n in zip(rows, notes)
    ]
    p99 = [r["p99_ms"] for r in rows]
    above = [
        0.0 if r["p99_ci_high_ms"] is None else r["p99_ci_high_ms"] - r["p99_ms"] for r in rows
    ]
    below = [0.0 if r["p99_ci_low_ms"] is None else r["p99_ms"] - r["p99_ci_low_ms"] for r in rows]
    colors = [
        SLOWER_COLOR if r["noisy"] else NOW_COLOR if r["role"] == "now" else OTHER_COLOR
        for r in rows
    ]
    fig = go.Figure()
    fig.add_scatter(
        x=x,
        y=p99,
        name="p99 (95 % CI)",
        mode="markers",
        text=notes,
        marker=dict(color=colors, size=11),
        error_y=dict(type="data", symmetric=False, array=above, arrayminus=below, width=8),
        hovertemplate="%{x}<br>p99 %{y:.3f} ms<br>%{text}<extra></extra>",
    )
    fig.add_scatter(
        x=x,
        y=[r["p50_ms"] for r in rows],
        name="p50",
        mode="markers",
        marker=dict(color=colors, size=7, symbol="diamond-open"),
        hovertemplate="%{x}<br>p50 %{y:.3f} ms<extra></extra>",
    )
    fig.update_yaxes(title_text="end to end (ms)", rangemode="tozero")
    return layout(fig, title or "end to end: this run beside the runs it is read against")


def _notes(row: dict) -> tuple[str, str]:
    busy = "busy machine" if row["noisy"] else ""
    unbounded = "upper end not bounded" if row["p99_ci_high_ms"] is None else ""
    return busy, unbounded
