"""The stages of one request: where its end-to-end time went, stage by stage.

Drawn under the latency-over-run chart: a click on a slow point (or the
request picker) shows this breakdown for that request.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..units import NS_PER_MS
from .style import empty_figure, layout, stage_color

TITLE = "Stages of one request"
UNATTRIBUTED_COLOR = "#bbbbbb"


def request_stages_figure(
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    stage_order: list[str] | tuple[str, ...],
    request: int | None,
) -> go.Figure:
    """Horizontal bars (ms) of one request's stages in pipeline order, then ``unattributed``.

    requests: ``request``, ``dur_ns`` (end to end); stages: ``request``, ``stage``,
    ``dur_ns`` (a stage called twice in a request is summed). ``unattributed`` is
    end to end minus the stages: the time between them, never hidden.
    """
    if request is None:
        return empty_figure("no measured request to break down", TITLE)
    row = requests[requests["request"] == request]
    if row.empty:
        return empty_figure(f"no request {request} in this run", TITLE)
    durations = stages[stages["request"] == request].groupby("stage", sort=False)["dur_ns"].sum()
    e2e_ns = int(row["dur_ns"].iloc[0])
    names = [s for s in stage_order if s in durations.index]
    values_ns = [int(durations[s]) for s in names]
    names.append("unattributed")
    values_ns.append(e2e_ns - sum(values_ns))
    fig = go.Figure(
        go.Bar(
            x=[v / NS_PER_MS for v in values_ns],
            y=names,
            orientation="h",
            marker_color=[stage_color(i) for i in range(len(names) - 1)] + [UNATTRIBUTED_COLOR],
            hovertemplate="%{y}: %{x:.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(xaxis_title="ms", yaxis={"autorange": "reversed"})
    return layout(fig, f"Stages of request {request}: {e2e_ns / NS_PER_MS:.3f} ms end to end")
