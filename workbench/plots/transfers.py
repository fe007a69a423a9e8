"""Transfers: bytes, time and achieved bandwidth by direction and host memory, and the
runtime calls that made the host wait for the GPU.

All numbers come from :mod:`workbench.analysis.transfers`; this module only
lays them out. One bar per copy class (``HtoD Pageable``, ``DtoH Pinned``,
``DtoD``...; copies whose name names no host side stay under their bare
direction) plus memsets, colored by the shared palette.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.gpu_timeline import gpu_work
from ..analysis.transfers import memcpy_by_direction, memcpy_by_host_memory, memset_summary, sync_calls
from .style import KIND_COLORS, NO_GPU_EVENTS, NS_PER_MS, empty_figure, format_bytes, kind_color, layout

COLUMNS = ["label", "count", "total_ns", "bytes", "gb_per_s"]


def copy_classes(events: pd.DataFrame) -> pd.DataFrame:
    """One row per copy class with copies, then ``memset``: label, count, total_ns, bytes (Int64), gb_per_s.

    Host-memory keys come from ``memcpy_by_host_memory``; the copies of a
    direction that name no host side (DtoD, or an HtoD whose name says neither
    pageable nor pinned) are the direction's remainder in ``memcpy_by_direction``.
    """
    keyed = memcpy_by_host_memory(events).rename(columns={"key": "label"})
    rows = [keyed[COLUMNS]]
    for d in memcpy_by_direction(events).itertuples(index=False):
        mine = keyed[keyed["label"].str.startswith(f"{d.direction} ")]
        count, total = d.count - int(mine["count"].sum()), d.total_ns - int(mine["total_ns"].sum())
        if count > 0:
            nbytes = pd.NA if pd.isna(d.bytes) else int(d.bytes) - int(mine["bytes"].fillna(0).sum())
            rows.append(_row(d.direction, count, total, nbytes))
    memset = memset_summary(events)
    if memset["count"]:
        rows.append(_row("memset", memset["count"], memset["total_ns"], memset["bytes"]))
    out = pd.concat(rows, ignore_index=True)
    return out.astype({"count": np.int64, "total_ns": np.int64, "bytes": "Int64", "gb_per_s": float})


def _row(label: str, count: int, total_ns: int, nbytes) -> pd.DataFrame:
    gbps = np.nan if nbytes is None or pd.isna(nbytes) or total_ns <= 0 else nbytes / total_ns
    return pd.DataFrame({"label": [label], "count": [count], "total_ns": [total_ns],
                         "bytes": pd.array([None if nbytes is None or pd.isna(nbytes) else int(nbytes)], dtype="Int64"),
                         "gb_per_s": [gbps]})


def transfer_figure(events: pd.DataFrame, *, title: str | None = None) -> go.Figure:
    """Four panels: bytes (MB), time (ms), bandwidth (GB/s) per copy class; sync calls (ms).

    Bar heights: ``bytes / 1e6``, ``total_ns / 1e6``, ``gb_per_s`` of
    :func:`copy_classes`; the sync panel is ``sync_calls(events)`` total time
    (ms) per call name with its count in the text. Copies without a byte count
    (some ROCm traces) have no bytes or bandwidth bar.
    """
    title = title or "Transfers and synchronizing calls"
    if gpu_work(events).empty and sync_calls(events).empty:
        return empty_figure(NO_GPU_EVENTS, title)
    classes, syncs = copy_classes(events), sync_calls(events)
    fig = make_subplots(rows=1, cols=4, horizontal_spacing=0.07,
                        subplot_titles=("bytes moved (MB)", "copy time (ms)", "achieved bandwidth (GB/s)",
                                        "synchronizing calls (ms)"))
    labels = classes["label"].tolist()
    colors = [KIND_COLORS["memset"] if lab == "memset" else kind_color("memcpy", lab) for lab in labels]
    nbytes = classes["bytes"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    panels = ((nbytes / 1e6, [format_bytes(b) for b in nbytes], "%{x}<br>%{text}"),
              (classes["total_ns"].to_numpy() / NS_PER_MS, [f"n={c}" for c in classes["count"]], "%{x}<br>%{y:.3f} ms, %{text}"),
              (classes["gb_per_s"].to_numpy(), [f"{g:.3g}" if np.isfinite(g) else "" for g in classes["gb_per_s"]],
               "%{x}<br>%{y:.3f} GB/s"))
    for col, (y, text, hover) in enumerate(panels, start=1):
        fig.add_bar(x=labels, y=y, text=text, marker_color=colors, showlegend=False,
                    hovertemplate=hover + "<extra></extra>", row=1, col=col)
    fig.add_bar(x=syncs["name"].tolist(), y=syncs["total_ns"].to_numpy() / NS_PER_MS,
                text=[f"n={c}" for c in syncs["count"]], marker_color=KIND_COLORS["sync"], showlegend=False,
                hovertemplate="%{x}<br>%{y:.3f} ms total, %{text}<extra></extra>", row=1, col=4)
    if classes.empty:
        fig.add_annotation(text="no copies or memsets", x=0.3, y=0.5, xref="paper", yref="paper", showarrow=False)
    return layout(fig, title + _pageable_note(classes))


def _pageable_note(classes: pd.DataFrame) -> str:
    copies = classes[classes["label"] != "memset"]
    pageable = copies[copies["label"].str.endswith("Pageable")]
    if pageable.empty:
        return ""
    share = pageable["total_ns"].sum() / max(int(copies["total_ns"].sum()), 1)
    return f": {100 * share:.0f}% of copy time from pageable memory (pin it to overlap copies)"
