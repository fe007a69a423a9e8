"""The explorers' trace figures, built by ``workbench.plots``.

Traces are read here once (``flame_from_trace``, ``trace_figures``) and only the
figures are kept.
"""

from __future__ import annotations

import os

import plotly.graph_objects as go

from ..analysis.flame import flame_tree
from ..errors import ConfigError
from ..plots import (
    flame_figure,
    gpu_timeline_figure,
    launch_figure,
    request_flame_chart,
    step_breakdown_figure,
    transfer_figure,
)
from ..plots.style import empty_figure
from ..trace import load_trace
from ..units import ns_to_ms

FLAME_MAX_NODES = 400


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
