"""The run on screen beside the runs it is read against: end-to-end p50 and p99 with its 95 % interval.

In: the explorer's beside table (``workbench.widgets.beside.beside_table``: ``role``,
``configuration``, ``source``, ``count``, ``p50_ms``, ``p99_ms``, ``p99_ci_low_ms``,
``p99_ci_high_ms``, ``noisy``). One x position per run; a run measured on a busy machine
is drawn in red and says so under its name; a p99 whose interval the sample does not bound has
no upper whisker and says "upper end not bounded" there.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .style import PERCENTILE_COLORS, SLOWER_COLOR, layout

NOW_COLOR = PERCENTILE_COLORS["p99_ms"]
OTHER_COLOR = "#8c8c8c"


def beside_figure(table: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Traces, in order: ``p99 (95 % CI)`` (markers with asymmetric error bars) and ``p50`` (markers)."""
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
    fig.add_trace(
        go.Scatter(
            x=x,
            y=p99,
            name="p99 (95 % CI)",
            mode="markers",
            text=notes,
            marker=dict(color=colors, size=11),
            error_y=dict(type="data", symmetric=False, array=above, arrayminus=below, width=8),
            hovertemplate="%{x}<br>p99 %{y:.3f} ms<br>%{text}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[r["p50_ms"] for r in rows],
            name="p50",
            mode="markers",
            marker=dict(color=colors, size=7, symbol="diamond-open"),
            hovertemplate="%{x}<br>p50 %{y:.3f} ms<extra></extra>",
        )
    )
    fig.update_yaxes(title_text="end to end (ms)", rangemode="tozero")
    return layout(fig, title or "end to end: this run beside the runs it is read against")


def _notes(row: dict) -> tuple[str, str]:
    busy = "busy machine" if row["noisy"] else ""
    unbounded = "upper end not bounded" if row["p99_ci_high_ms"] is None else ""
    return busy, unbounded
