"""The explorers' figures, built from cached summaries by ``workbench.plots``.

Thin glue: which builder, which part of a :class:`~workbench.widgets.summaries.RunView`,
which title. Traces are read here once (``flame_from_trace``) and only the
figure is kept.
"""

from __future__ import annotations

import os

import plotly.graph_objects as go

from ..analysis.flame import flame_tree
from ..analysis.tail import tail_attribution
from ..errors import ConfigError
from ..plots import (
    budget_figure,
    distribution_figure,
    flame_figure,
    gpu_timeline_figure,
    latency_over_run_figure,
    launch_figure,
    ratio_figure,
    request_flame_chart,
    step_breakdown_figure,
    tail_figure,
    transfer_figure,
)
from ..plots.flame import differential_flame_figure
from ..plots.request_stages import request_stages_figure
from ..plots.style import empty_figure
from ..trace import load_trace
from ..units import ns_to_ms
from .summaries import RunView

FLAME_MAX_NODES = 400


def budget_view(view: RunView, sla_ms: float | None) -> go.Figure:
    return budget_figure(view.summary, sla_ms=sla_ms, title=None)


def distribution_view(view: RunView, stage: str | None, kind: str) -> go.Figure:
    return distribution_figure(view.requests, view.stages, view.stage_order, stage=stage, kind=kind)


def tail_view(view: RunView) -> go.Figure:
    """Tail attribution of the run on screen (``analysis.tail`` -> ``plots.tail``)."""
    return tail_figure(tail_attribution(view.requests, view.stages, view.stage_order))


def stacks_view(view: RunView) -> go.Figure:
    """The sampled stacks of the run's slowest requests minus its median ones (``plots.flame``), for the
    stage its headline names; a figure saying so when the run has none."""
    return differential_flame_figure(view.stacks)


def over_run_view(view: RunView, request: int | None) -> go.Figure:
    """Latency over the run with the picked request ringed, so the stage breakdown below has its place."""
    return latency_over_run_figure(view.requests, picked=request)


def request_stages_view(view: RunView, request: int | None) -> go.Figure:
    """One request's stages (ms), in pipeline order, with the time between them as ``unattributed``."""
    return request_stages_figure(view.requests, view.stages, view.stage_order, request)


def compare_view(result: dict) -> go.Figure:
    """B against A per stage and end to end, with intervals and verdicts (``plots.compare_figures.ratio_figure``)."""
    return ratio_figure(result, metric=result.get("metric") or "p50")


def flame_from_trace(path: str | os.PathLike, *, title: str | None = None) -> go.Figure:
    """Load a trace and draw its flame graph (stage -> operators -> runtime calls -> kernels, copies)."""
    return flame_figure(
        flame_tree(load_trace(path).events),
        title=title or "Flame graph of the traced requests",
        max_nodes=FLAME_MAX_NODES,
    )


def trace_figures(trace) -> dict:
    """Every view of a loaded trace (``workbench.trace.Trace``), plus a one-line ``summary``.

    The views share one trace: the launch join and the step tables are computed once."""
    return {
        "launches": launch_figure(trace),
        "transfers": transfer_figure(trace),
        "timeline": gpu_timeline_figure(trace),
        "steps": step_breakdown_figure(trace),
        "flame": flame_figure(
            flame_tree(trace), title=f"Flame graph: {trace.path.name}", max_nodes=FLAME_MAX_NODES
        ),
        "request": request_chart(trace, 0),
        "summary": trace_summary(trace),
    }


def request_chart(events, request: int) -> go.Figure:
    """The request flame chart, or a figure saying why there is none (a request out of range)."""
    try:
        return request_flame_chart(events, request=request)
    except ConfigError as exc:
        return empty_figure(str(exc), "Request flame chart")


def trace_summary(trace) -> str:
    """One status line: file, platform, event count, time span (ms)."""
    events = trace.events
    span_ms = (
        ns_to_ms(int((events["ts_ns"] + events["dur_ns"]).max()) - int(events["ts_ns"].min()))
        if len(events)
        else 0.0
    )
    platform = trace.meta.get("platform", "?")
    return f"{trace.path.name}: {len(events):,} events, {platform}, {span_ms:,.1f} ms span"
