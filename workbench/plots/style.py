"""One palette, one set of labels and a few layout helpers shared by every figure.

Colors are keyed by what a bar stands for (:func:`kind_key`), so every view agrees on what is red.
Display units live here and in axis labels only; tables keep ``*_ns``/``*_ms``.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from ..analysis.transfers import classify_copy
from ..errors import ConfigError
from ..naming import STAGE_PREFIX

# kind -> (color, label); the order is the legend's
_KINDS = {
    "stage": ("#4c72b0", "stage"),
    "cpu_op": ("#8172b3", "CPU op"),
    "runtime": ("#dd8452", "runtime / launch"),
    "kernel": ("#55a868", "kernel"),
    "memcpy_htod_pageable": ("#c44e52", "memcpy HtoD pageable"),
    "memcpy_htod_pinned": ("#f08a8c", "memcpy HtoD pinned"),
    "memcpy_dtoh_pageable": ("#937860", "memcpy DtoH pageable"),
    "memcpy_dtoh_pinned": ("#c9a98b", "memcpy DtoH pinned"),
    "memcpy_htod_host": ("#8c564b", "memcpy HtoD host (AMD)"),
    "memcpy_dtoh_host": ("#bcbd22", "memcpy DtoH host (AMD)"),
    "memcpy_dtod": ("#da8bc3", "memcpy DtoD"),
    "memcpy": ("#e377c2", "memcpy (other)"),
    "memset": ("#ccb974", "memset"),
    "sync": ("#d62728", "sync"),
    "python": ("#64b5cd", "Python"),
    "other": ("#8c8c8c", "other"),
}
KIND_COLORS: dict[str, str] = {kind: color for kind, (color, _label) in _KINDS.items()}
KIND_LABELS: dict[str, str] = {kind: label for kind, (_color, label) in _KINDS.items()}
# Stage bars: a qualitative sequence in pipeline order; unattributed and end to end apart.
STAGE_COLORS = [
    "#4c72b0",
    "#55a868",
    "#dd8452",
    "#8172b3",
    "#64b5cd",
    "#ccb974",
    "#937860",
    "#da8bc3",
]
END_TO_END_COLOR = "#333333"
PERCENTILE_COLORS = {"p50_ms": "#9ecae1", "p95_ms": "#4292c6", "p99_ms": "#08306b"}
WARMUP_COLOR = "#c7c7c7"
SLA_COLOR = "#d62728"
FASTER_COLOR = "#2ca02c"
SLOWER_COLOR = "#d62728"

# palette key -> the trace analysis' kind strings that map onto it
_ALIASES = {
    name: key
    for key, names in {
        "cpu_op": ("cpu_op", "operator", "cpu", "user_annotation"),
        "runtime": ("runtime", "cuda_runtime", "cuda_driver", "launch"),
        "kernel": ("kernel",),
        "memset": ("memset", "gpu_memset"),
        "sync": ("sync", "cuda_sync"),
        "stage": ("stage",),
        "python": ("python", "python_function"),
        "other": ("gpu_user_annotation", "gpu_annotation", "root"),
    }.items()
    for name in names
}


def kind_key(kind: object, name: object = "") -> str:
    """The palette key of a kind string and event name: copies by :func:`copy_palette_key`, a stage
    range (:data:`workbench.naming.STAGE_PREFIX`) ``stage``, an unknown kind ``other``."""
    if isinstance(name, str) and name.startswith(STAGE_PREFIX):
        return "stage"
    k = str(kind).lower() if isinstance(kind, str) else ""
    if k in KIND_COLORS and not k.startswith("memcpy"):
        return k
    if "memcpy" in k or "copy" in k:
        return copy_palette_key(*classify_copy(name if isinstance(name, str) else ""))
    return _ALIASES.get(k, "other")


def copy_palette_key(direction: str, host_memory: str | None) -> str:
    """The palette key of a copy class (``analysis.transfers.classify_copy``), else ``memcpy``."""
    if direction == "DtoD":
        return "memcpy_dtod"
    key = f"memcpy_{direction.lower()}_{(host_memory or '').lower()}"
    return key if key in KIND_COLORS else "memcpy"


def stage_color(index: int) -> str:
    return STAGE_COLORS[index % len(STAGE_COLORS)]


def format_ns(ns: float | int | None) -> str:
    """Human duration: ``1.23 s``, ``45.6 ms``, ``789 us``, ``120 ns``; ``-`` for missing."""
    return _human(ns, (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1)))


def format_bytes(n: float | int | None) -> str:
    """Human size in powers of 1000 (``1.5 MB``); ``-`` for missing."""
    return _human(n, (("GB", 1e9), ("MB", 1e6), ("kB", 1e3), ("B", 1)))


def _human(n: float | int | None, units: tuple) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for unit, scale in units[:-1]:
        if abs(float(n)) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} {units[-1][0]}"


# an annotation centred on its axes' domain (xref/yref say which)
CENTER = dict(x=0.5, y=0.5, showarrow=False)
# an annotation at the plot's left edge, its lines growing upwards from its y (paper coordinates)
ABOVE = dict(x=0, xref="paper", yref="paper", xanchor="left", yanchor="bottom", showarrow=False)
_AXIS = dict(
    gridcolor="#EBF0F8",
    linecolor="#EBF0F8",
    zerolinecolor="#EBF0F8",
    zerolinewidth=2,
    ticks="",
    automargin=True,
    title=dict(standoff=15),
)
# plotly_white's look without its defaults for every trace type (ten times larger figures)
TEMPLATE = go.layout.Template(
    layout=dict(
        paper_bgcolor="white",
        plot_bgcolor="white",
        font=dict(color="#2a3f5f"),
        hovermode="closest",
        hoverlabel=dict(align="left"),
        xaxis=_AXIS,
        yaxis=_AXIS,
        colorway=[
            "#636efa",
            "#EF553B",
            "#00cc96",
            "#ab63fa",
            "#FFA15A",
            "#19d3f3",
            "#FF6692",
            "#B6E880",
            "#FF97FF",
            "#FECB52",
        ],
    )
)


def layout(fig: go.Figure, title: str | None, **kwargs) -> go.Figure:
    """Shared layout: title at the top, legend in a row under it (``legend="right"``: a column)."""
    # the title hangs from the top edge with a pad: y=0.98 let a three-line title poke out of a short figure
    options = dict(
        title=dict(text=title, yref="container", y=1, yanchor="top", pad=dict(t=title_pad(title))),
        template=TEMPLATE,
        margin=dict(l=60, r=20, t=110, b=50),
        legend=dict(
            orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0, traceorder="normal"
        ),
    )
    if kwargs.get("legend") == "right":
        kwargs["legend"] = dict(
            orientation="v", yanchor="top", y=1, xanchor="left", x=1.02, traceorder="normal"
        )
    fig.update_layout(**(options | kwargs))
    return fig


# plotly draws a title of several lines 12 px higher than asked (yanchor top)
MULTILINE_TITLE_RISE_PX = 12


def title_pad(title: str | None, top: float = 10) -> float:
    """The title's top pad (px) for its first line to start ``top`` px under the figure's top edge."""
    return top + (MULTILINE_TITLE_RISE_PX if title and "<br>" in title else 0)


def require_columns(table, needed, subject: str, hint: str) -> None:
    """Raise ConfigError ``<subject> missing columns [...]; pass <hint>`` unless ``table`` has ``needed``."""
    missing = [c for c in needed if c not in getattr(table, "columns", ())]
    if missing:
        raise ConfigError(f"{subject} missing columns {missing}; pass {hint}")


def empty_figure(message: str, title: str | None = None) -> go.Figure:
    """A figure with no data and one centered annotation saying why (never an exception)."""
    fig = go.Figure()
    fig.add_annotation(text=message, xref="paper", yref="paper", font=dict(size=16), **CENTER)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return layout(fig, title)


NO_GPU_EVENTS = "no GPU events in this trace"


def log_edges(values: np.ndarray, bins: int, floor: float = 1e-3) -> np.ndarray:
    """``bins + 1`` log-spaced edges covering ``values`` (clipped up to ``floor``, in the values' unit)."""
    v = np.maximum(np.asarray(values, dtype=float), floor)
    lo, hi = (float(v.min()), float(v.max())) if v.size else (floor, floor * 10)
    return np.geomspace(lo, hi if hi > lo else lo * 10, bins + 1)


def decade_ticks(lo_log10: float, hi_log10: float, unit: str) -> dict:
    """Axis options for log10 values on a linear axis: a tick per decade labelled ``1 us``, ``10 us``..."""
    decades = range(int(np.floor(lo_log10)), int(np.ceil(hi_log10)) + 1)
    return dict(tickvals=list(decades), ticktext=[f"{10.0**d:g} {unit}" for d in decades])


def log_axis(lo: float, hi: float, unit: str) -> dict:
    """Options of a log axis over ``lo``..``hi`` (> 0, in ``unit``) labelled at whole decades only
    (plotly's labelled minor ticks read as "9 0.1 2 3 ... 1 2")."""
    lo, hi = float(lo), float(hi)
    if not (lo > 0 and math.isfinite(lo)):
        lo = hi / 10 if hi > 0 and math.isfinite(hi) else 1.0
    if not (hi > lo and math.isfinite(hi)):
        hi = lo * 10
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    last = max(last, first + 1)
    return dict(
        type="log",
        dtick=1,
        range=[first, last],
        ticksuffix=f" {unit}",
        exponentformat="none",
        minor=dict(ticks="", showgrid=True, gridcolor="#f2f2f2"),
    )


def value_axis(log: bool, unit: str, *arrays) -> dict:
    """Axis options: :func:`log_axis` over the positive values of ``arrays`` (in ``unit``), else linear."""
    return log_axis(*positive_extent(*arrays), unit) if log else dict(type="linear")


def add_step_area(fig: go.Figure, edges, heights, name: str, color: str, hover: str, **kw) -> None:
    """A filled step outline of ``heights`` over the bin ``edges`` (the last height repeated)."""
    y = np.append(heights, heights[-1] if len(heights) else 0)
    line = dict(shape="hv", color=color) | kw.pop("line", {})
    fig.add_scatter(
        x=edges, y=y, name=name, mode="lines", line=line, fill="tozeroy", hovertemplate=hover, **kw
    )


def add_bars(
    fig: go.Figure, labels, parts, where: str = "%{x}<br>", unit: str = "ms", **kw
) -> None:
    """A bar per ``(name, values, color)`` of ``parts`` over ``labels``, its hover ``<where><name>
    <value> <unit>``; ``orientation="h"`` lays the values along x."""
    across = kw.get("orientation") == "h"
    for name, values, color in parts:
        values = np.asarray(values, dtype=float)
        fig.add_bar(
            **(dict(x=values, y=labels) if across else dict(x=labels, y=values)),
            name=name,
            marker_color=color,
            hovertemplate=f"{where}{name} %{{{'x' if across else 'y'}:.3f}} {unit}<extra></extra>",
            **kw,
        )


def add_sla_line(fig: go.Figure, x: list[float], sla_ms: float) -> None:
    """The SLA as a dashed line trace over ``x`` (a trace: a shape on a log axis stretches its autorange)."""
    fig.add_scatter(
        x=[float(v) for v in x],
        y=[float(sla_ms)] * 2,
        mode="lines",
        name=f"SLA {sla_ms:g} ms",
        line=dict(color=SLA_COLOR, dash="dash"),
        hoverinfo="skip",
    )


def positive_extent(*arrays) -> tuple[float, float]:
    """Smallest and largest positive finite value across ``arrays`` (``(1, 10)`` when there is none)."""
    values = np.concatenate([np.empty(0), *(np.asarray(a, dtype=float).ravel() for a in arrays)])
    values = values[np.isfinite(values) & (values > 0)]
    return (float(values.min()), float(values.max())) if values.size else (1.0, 10.0)
