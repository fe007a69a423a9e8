"""Kernel launches (:mod:`workbench.analysis.launches`): launch delay, CPU launch time vs GPU time,
short-kernel share, a verdict; and transfers (:mod:`workbench.analysis.transfers`): bytes, time and
bandwidth per copy class (direction and host memory) and memsets, and the runtime calls that made
the host wait. Binned here, so a million launches cost a few kilobytes of figure."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.launches import launch_distribution, launch_pair_summary, steady_launch_pairs
from ..analysis.trace_stages import launch_verdict
from ..analysis.transfers import copy_classes, split_copy_key, sync_calls
from ..trace import Trace
from ..units import NS_PER_MS, NS_PER_US
from .style import (
    CENTER,
    KIND_COLORS,
    NO_GPU_EVENTS,
    PERCENTILE_COLORS,
    add_bars,
    add_step_area,
    copy_palette_key,
    decade_ticks,
    empty_figure,
    format_bytes,
    layout,
    log_axis,
    log_edges,
    positive_extent,
    value_axis,
)

# copy_classes: the analysis table drawn here
__all__ = ["copy_classes", "launch_figure", "transfer_comparison_figure", "transfer_figure"]


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


BINS = 40
# the verdict's line length at 17 px: one 150-character line ran out of a 1150 px figure
TITLE_CHARS = 110
# the panels after the launch delay's (top left), row by row
PANEL_TITLES = ("launch call vs GPU time (count)", "percentiles (us)", "short kernels")


def launch_figure(
    events: Trace | pd.DataFrame, *, title: str | None = None, bins: int = BINS
) -> go.Figure:
    """Four panels over the launch pairs (us): the launch delay histogram, launch time vs GPU time
    (2-D, log10, with y = x), their p50/p90/p99, and the short kernels (HTA's rule) vs the rest;
    the title is :func:`launch_verdict`'s sentence."""
    events = Trace.of(events)
    pairs = steady_launch_pairs(events)  # cold start apart, as in the verdict of the title
    if pairs.empty:
        return empty_figure(
            NO_GPU_EVENTS if events.gpu_work.empty else "no kernel launches joined to GPU work",
            title or "Kernel launches",
        )
    summary = launch_pair_summary(pairs)
    _, sentence = launch_verdict(events)
    delay_us = pairs["launch_delay_ns"].to_numpy() / NS_PER_US
    zero = int((delay_us <= 0).sum())
    zeros = f" ({zero} of {delay_us.size} zero, not on the log axis)" if zero else ""
    titles = ("launch delay" + zeros, *PANEL_TITLES)
    fig = make_subplots(
        rows=2, cols=2, vertical_spacing=0.16, horizontal_spacing=0.12, subplot_titles=titles
    )
    _delay_hist(fig, delay_us, bins)
    _cpu_vs_gpu(fig, pairs, bins)
    dist = launch_distribution(pairs)
    _percentiles(fig, dist)
    short_share = _short_kernels(fig, summary)
    delay = float(dist.set_index("metric").loc["launch_delay", "p50_ns"]) / NS_PER_US
    numbers = (
        f"<br><sup>{short_share:.0f}% of {summary['count']} launches are short kernels; median launch delay "
        f"{delay:.3g} us; {summary['delay_over_100us']} delays over 100 us</sup>"
    )
    # the percentiles' legend under the bottom panels: above the plots it sat on the delay panel's title
    legend = dict(orientation="h", yanchor="top", y=-0.06, xanchor="left", x=0)
    head = title or "<br>".join(textwrap.wrap(sentence, TITLE_CHARS)) + numbers
    return layout(fig, head, height=700, margin=dict(t=130), legend=legend)


def _short_kernels(fig: go.Figure, summary: dict) -> float:
    """The short kernels against the other launches (bottom right); their share in %."""
    short, count = summary["short_kernels"], summary["count"]
    fig.add_bar(
        x=["short kernels", "other launches"],
        y=[short, count - short],
        marker_color=[KIND_COLORS["kernel"], KIND_COLORS["runtime"]],
        showlegend=False,
        text=[f"{100 * short / count:.1f}%", f"{100 * (1 - short / count):.1f}%"],
        hovertemplate="%{x}: %{y}<extra></extra>",
        row=2,
        col=2,
    )
    fig.update_yaxes(title_text="launches", row=2, col=2)
    return 100 * short / count


def _delay_hist(fig: go.Figure, delay_us: np.ndarray, bins: int) -> None:
    """Positive delays only, on a log axis (zero delays are a count in the panel's title)."""
    positive = delay_us[delay_us > 0]
    if positive.size == 0:
        fig.add_annotation(
            text="every launch delay is zero",
            xref="x domain",
            yref="y domain",
            row=1,
            col=1,
            **CENTER,
        )
        return
    edges = log_edges(positive, bins)
    counts, _ = np.histogram(positive, bins=edges)
    hover = "from %{x:.3g} us<br>%{y} launches<extra></extra>"
    color = KIND_COLORS["runtime"]
    add_step_area(fig, edges, counts, "launch delay", color, hover, showlegend=False, row=1, col=1)
    axis = value_axis(True, "us", positive)
    fig.update_xaxes(title_text="launch delay (us, log scale)", row=1, col=1, **axis)
    fig.update_yaxes(title_text="launches", row=1, col=1)


def _cpu_vs_gpu(fig: go.Figure, pairs: pd.DataFrame, bins: int) -> None:
    cpu_us, gpu_us = (pairs[c].to_numpy() / NS_PER_US for c in ("cpu_dur_ns", "gpu_dur_ns"))
    edges = np.log10(log_edges(np.concatenate([cpu_us, gpu_us]), bins))
    counts, _, _ = np.histogram2d(
        np.log10(np.maximum(cpu_us, 10 ** edges[0])),
        np.log10(np.maximum(gpu_us, 10 ** edges[0])),
        bins=[edges, edges],
    )
    centers = (edges[:-1] + edges[1:]) / 2
    z = np.where(counts.T > 0, counts.T, np.nan)
    fig.add_heatmap(
        x=centers,
        y=centers,
        z=z,
        colorscale="Viridis",
        showscale=True,
        colorbar=dict(
            title=dict(text="launches", side="right"), x=1.0, y=0.79, len=0.42, thickness=12
        ),
        hovertemplate="launch %{x:.2f} log10 us<br>GPU %{y:.2f} log10 us<br>%{z} launches<extra></extra>",
        row=1,
        col=2,
    )
    fig.add_scatter(
        x=[edges[0], edges[-1]],
        y=[edges[0], edges[-1]],
        mode="lines",
        name="GPU = launch",
        line=dict(color="#d62728", dash="dash"),
        showlegend=False,
        row=1,
        col=2,
    )
    ticks = decade_ticks(edges[0], edges[-1], "us")
    fig.update_xaxes(title_text="launch call CPU time (us)", row=1, col=2, **ticks)
    fig.update_yaxes(title_text="GPU time (us)", row=1, col=2, **ticks)


def _percentiles(fig: go.Figure, dist: pd.DataFrame) -> None:
    """p50/p90/p99 bars per metric; the log axis starts a decade below the smallest (else a sliver)."""
    names = {"cpu_dur": "launch call", "launch_delay": "launch delay", "gpu_dur": "GPU time"}
    parts = [
        (col.removesuffix("_ns"), dist[col].to_numpy(dtype=float) / NS_PER_US, color)
        for col, color in zip(("p50_ns", "p90_ns", "p99_ns"), PERCENTILE_COLORS.values())
    ]
    x = [names[m] for m in dist["metric"]]
    add_bars(fig, x, parts, "%{x} ", "us", legendgroup="percentiles", row=2, col=1)
    lo, hi = positive_extent(*(values for _, values, _ in parts))
    fig.update_yaxes(title_text="us (log scale)", row=2, col=1, **log_axis(lo / 10, hi, "us"))
