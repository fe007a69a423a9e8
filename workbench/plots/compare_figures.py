"""Two runs side by side: per-stage values of each and the deltas B - A, or the ratio B/A.

Stages are matched by name (A's order first, then stages only B has); a stage missing from one run
has no bar there and no delta. A delta smaller than the run-to-run spread is noise: the hover shows
both values so the reader can judge.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .budget import PERCENTILES, budget_rows, check_summary
from .style import FASTER_COLOR, PERCENTILE_COLORS, SLOWER_COLOR, empty_figure, layout

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
    """Top: ``stat`` (ms) per stage for A and B, side by side. Bottom: B - A (ms) for p50/p95/p99.

    Delta bars carry the relative change in their text; the title names the
    end-to-end p99 of both and the change. Colors: slower in red, faster in green
    (by the marker outline), so a regression stands out.
    """
    check_summary(summary_a, "summary_a")
    check_summary(summary_b, "summary_b")
    table = compare_table(summary_a, summary_b)
    if table.empty:
        return empty_figure("no stages to compare", title or "Comparison")
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=(
            f"{stat.removesuffix('_ms')} per stage",
            f"change {labels[1]} - {labels[0]}",
        ),
    )
    names = table["name"].tolist()
    for side, label, color in (("a", labels[0], SIDE_COLORS[0]), ("b", labels[1], SIDE_COLORS[1])):
        fig.add_bar(
            x=names,
            y=table[f"{stat}_{side}"].to_numpy(),
            name=label,
            marker_color=color,
            legendgroup="runs",
            hovertemplate="%{x}<br>" + label + " %{y:.3f} ms<extra></extra>",
            row=1,
            col=1,
        )
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
        fig.add_bar(
            x=names,
            y=delta,
            name=f"Δ {col.removesuffix('_ms')}",
            marker_color=PERCENTILE_COLORS[col],
            marker_line=dict(
                color=[SLOWER_COLOR if d > 0 else FASTER_COLOR for d in np.nan_to_num(delta)],
                width=2,
            ),
            text=_relative(table[f"{col}_a"].to_numpy(), delta),
            textangle=-90,  # upright, three neighbours' labels ran together ("+475.9%+426.0%+366.3%")
            legendgroup="delta",
            hovertemplate=f"%{{x}}<br>Δ {col[:3]} %{{y:+.3f}} ms (%{{text}})<extra></extra>",
            row=2,
            col=1,
        )


def _relative(base: np.ndarray, delta: np.ndarray) -> list[str]:
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = delta / base
    return ["" if not np.isfinite(r) else f"{100 * r:+.1f}%" for r in rel]


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
    """Ratio B/A of ``metric`` per stage and end to end, with its interval as an error bar.

    ``result``: what ``workbench compare --json`` prints (or ``Comparison.result``),
    interleaved or separate runs. One marker series per comparison (B against A,
    then C against A, ...), colored by verdict; a line at 1 and a shaded band
    ``1 +/- min_effect`` (a difference inside it does not count).
    """
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
        lo = [_nan(e.get(f"{metric}_ci", [None, None])[0]) for e in entries]
        hi = [_nan(e.get(f"{metric}_ci", [None, None])[1]) for e in entries]
        verdicts = [e.get("verdict", "") for e in entries]
        b = comp.get("b", 1)
        name = f"{labels[b] if b < len(labels) else 'B'} / {labels[0] if labels else 'A'}"
        fig.add_scatter(
            x=names,
            y=ratio,
            mode="markers",
            name=name,
            text=verdicts,
            marker=dict(
                size=11,
                color=[VERDICT_COLORS.get(v, "#333333") for v in verdicts],
                line=dict(color="#333333", width=1),
            ),
            error_y=dict(
                type="data",
                symmetric=False,
                array=np.subtract(hi, ratio).tolist(),
                arrayminus=np.subtract(ratio, lo).tolist(),
                color="#555555",
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
