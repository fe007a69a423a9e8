"""Transfers (:mod:`workbench.analysis.transfers`): bytes, time and bandwidth per copy class
(direction and host memory) and memsets, and the runtime calls that made the host wait."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..trace import Trace
from ..analysis.transfers import copy_classes, split_copy_key, sync_calls
from ..units import NS_PER_MS
from .style import KIND_COLORS, NO_GPU_EVENTS, copy_palette_key, empty_figure, format_bytes, layout

# copy_classes: the analysis table drawn here
__all__ = ["copy_classes", "transfer_comparison_figure", "transfer_figure"]


PANELS = ("bytes moved (MB)", "copy time (ms)", "achieved bandwidth (GB/s)")


def transfer_figure(events: Trace | pd.DataFrame, *, title: str | None = None) -> go.Figure:
    """Four panels: bytes (MB), time (ms), bandwidth (GB/s) per copy class (:func:`copy_classes`);
    ``sync_calls`` time (ms) per call name. Copies without a byte count have no bytes bar."""
    title = title or "Transfers and synchronizing calls"
    events = Trace.of(events)  # every table below from one trace model
    if events.gpu_work.empty and sync_calls(events).empty:
        return empty_figure(NO_GPU_EVENTS, title)
    classes, syncs = copy_classes(events), sync_calls(events)
    titles = (*PANELS, "synchronizing calls (ms)")
    fig = make_subplots(rows=1, cols=4, horizontal_spacing=0.07, subplot_titles=titles)
    _add_panels(fig, classes, syncs)
    if classes.empty:
        fig.add_annotation(
            text="no copies or memsets", x=0.3, y=0.5, xref="paper", yref="paper", showarrow=False
        )
    # level, "DtoH Pageable" ran into "HtoD Pinned" in a quarter of 1280 px
    fig.update_xaxes(tickangle=-90)
    return layout(fig, title + _pageable_note(classes))


def _add_panels(fig: go.Figure, classes: pd.DataFrame, syncs: pd.DataFrame) -> None:
    """Per copy class MB, ms and GB/s; panel 4: the synchronizing calls' ms per call name."""
    labels = classes["label"].tolist()
    colors = [
        KIND_COLORS["memset" if lab == "memset" else copy_palette_key(*split_copy_key(lab))]
        for lab in labels
    ]
    nbytes = classes["bytes"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    ys = (*_panel_values(classes), syncs["total_ns"].to_numpy() / NS_PER_MS)
    texts = (
        [format_bytes(b) for b in nbytes],
        [f"n={c}" for c in classes["count"]],
        [f"{g:.3g}" if np.isfinite(g) else "" for g in classes["gb_per_s"]],
        [f"n={c}" for c in syncs["count"]],
    )
    hovers = ("%{x}<br>%{text}", "%{x}<br>%{y:.3f} ms, %{text}", "%{x}<br>%{y:.3f} GB/s")
    hovers += ("%{x}<br>%{y:.3f} ms total, %{text}",)
    xs = (labels,) * 3 + (syncs["name"].tolist(),)
    panels = zip(xs, ys, texts, (colors,) * 3 + (KIND_COLORS["sync"],), hovers)
    for col, (x, y, text, color, hover) in enumerate(panels, start=1):
        fig.add_bar(
            x=x,
            y=y,
            text=text,
            marker_color=color,
            showlegend=False,
            hovertemplate=hover + "<extra></extra>",
            row=1,
            col=col,
        )


def _panel_values(classes: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """Bytes (MB), copy time (ms) and bandwidth (GB/s) per copy class, NaN where none."""
    columns = classes[["bytes", "total_ns", "gb_per_s"]].astype("Float64")
    nbytes, total_ns, gb_per_s = columns.to_numpy(dtype=float, na_value=np.nan).T
    return nbytes / 1e6, total_ns / NS_PER_MS, gb_per_s


PIN_ADVICE_SHARE = 0.25  # advise pinning only where pageable copies hold this share of copy time


def _pageable_note(classes: pd.DataFrame) -> str:
    """``: 67% of copy time from pageable memory (HtoD Pageable) (pin it ...)``, or nothing."""
    copies = classes[classes["label"] != "memset"]
    pageable = copies[copies["label"].str.endswith("Pageable")]
    if pageable.empty:
        return ""
    share = pageable["total_ns"].sum() / max(int(copies["total_ns"].sum()), 1)
    advice = " (pin it to overlap copies)" if share >= PIN_ADVICE_SHARE else ""
    return f": {100 * share:.0f}% of copy time from pageable memory ({', '.join(pageable['label'])}){advice}"


PATTERNS = ("", "/", ".", "x", "-", "+")
LEGEND_GREY = "#d9d9d9"


def transfer_comparison_figure(
    traces: Mapping[str, Trace | pd.DataFrame], *, title: str | None = None
) -> go.Figure:
    """Runs side by side on shared axes: bytes (MB), copy time (ms) and bandwidth (GB/s) per copy
    class; ``traces``: run label -> trace, in legend order, each run its own bar pattern."""
    title = title or "Copies compared: " + " vs ".join(traces)
    tables = {name: copy_classes(Trace.of(t)) for name, t in traces.items()}
    tables = {name: c[c["label"] != "memset"] for name, c in tables.items()}
    labels = list(dict.fromkeys(label for c in tables.values() for label in c["label"]))
    if not labels:
        return empty_figure("no copies in these traces", title)
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08, subplot_titles=PANELS)
    colors = [KIND_COLORS[copy_palette_key(*split_copy_key(label))] for label in labels]
    for i, (name, c) in enumerate(tables.items()):
        values = _panel_values(c.set_index("label").reindex(labels))
        for col, y in enumerate(values, start=1):
            fig.add_bar(
                x=labels,
                y=y,
                name=name,
                legendgroup=name,
                showlegend=False,
                offsetgroup=str(i),
                marker=_run_marker(colors, i),
                hovertemplate=f"{name}<br>%{{x}}<br>%{{y:.4g}}<extra></extra>",
                row=1,
                col=col,
            )
        # the run's legend entry: its pattern on grey (the bars' colours are the copy classes')
        fig.add_bar(
            x=[None],
            y=[None],
            name=name,
            legendgroup=name,
            offsetgroup=str(i),  # the run's slot: no extra slot in the first panel's groups
            marker=_run_marker(LEGEND_GREY, i),
            hoverinfo="skip",
            row=1,
            col=1,
        )
    fig.update_xaxes(tickangle=-90)
    # the runs' legend in a column right of the panels: above them it sat on the first panel's title
    return layout(fig, title, barmode="group", legend="right")


def _run_marker(color, i: int) -> dict:
    """The i-th run's bars: its pattern, outlined."""
    pattern = dict(shape=PATTERNS[i % len(PATTERNS)])
    return dict(color=color, pattern=pattern, line=dict(color="#333333", width=1))
