"""Flame graphs: an icicle of the flame tree (:mod:`workbench.analysis.flame`), and the
slow-minus-median icicles (sampled stacks, traced requests, work beside waits). A tree with GPU
work gets a second icicle under the first, per stage its kernels, copies and memsets by GPU time
(in the host icicle a 20 us kernel under a 10 ms request is a few pixels wide and never labelled).
"""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.flame import flame_tree, gpu_work_by_stage, prune, pruned_sizes
from ..analysis.waits import WAIT_WORDS
from ..trace import Trace
from ..errors import ConfigError
from ..units import ns_to_ms
from .style import (
    ABOVE,
    KIND_COLORS,
    KIND_LABELS,
    empty_figure,
    format_bytes,
    format_ns,
    kind_key,
    layout,
    require_columns,
)

TREE_COLUMNS = ("id", "parent", "name", "kind", "self_ns", "total_ns", "count", "bytes")
LABEL_CHARS = 60
# per set: a share of fewer samples is a guess (its standard error up to 0.5/sqrt(n))
MIN_STACK_SAMPLES = 20
HOVER_CHARS = 160
# the cut note's line length: one long line was clipped at half of a 1280 px screen
NOTE_CHARS = 100
LABEL_MIN_PX = 10  # the smallest label font (px) a student reads at 1280x800
# a box too narrow for a LABEL_MIN_PX label shows none (its hover and a zoom still name it)
SMALL_LABELS_HIDDEN = dict(minsize=LABEL_MIN_PX, mode="hide")
PRUNE_SHARES = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
LEGEND_CHARS = 80  # a kind legend line's visible length: a CUDA run's eight kinds ran off 640 px
GPU_PANEL = 0.3  # the GPU work icicle's share of the plot height (bottom)
GPU_GAP = 0.08  # between the panels: the GPU panel's heading
GPU_LABEL_CHARS = 18
GPU_LABEL_LINES = 3


def fit_tree(tree: pd.DataFrame, max_nodes: int) -> tuple[pd.DataFrame, float | None, bool]:
    """``(tree, share, cut)``: the tree folded by :func:`~workbench.analysis.flame.prune` at the
    smallest of :data:`PRUNE_SHARES` that leaves at most ``max_nodes`` nodes (None: it fits); when
    none is enough, the deepest levels of the largest share's tree are cut (``cut`` True)."""
    if len(tree) <= max_nodes:
        return tree, None, False
    sizes = pruned_sizes(tree, PRUNE_SHARES)
    share = next((s for s, n in zip(PRUNE_SHARES, sizes) if n <= max_nodes), PRUNE_SHARES[-1])
    pruned = prune(tree, share)
    if len(pruned) <= max_nodes:
        return pruned, share, False
    if "depth" not in pruned.columns:  # parents come before children: a prefix is still a tree
        return pruned.iloc[:max_nodes].reset_index(drop=True), share, True
    per_level = np.bincount(pruned["depth"].to_numpy(np.int64))  # as many levels as fit, >= 1
    levels = max(int(np.searchsorted(np.cumsum(per_level), max_nodes, side="right")), 1)
    return pruned[pruned["depth"].to_numpy() < levels].reset_index(drop=True), share, True


def display_totals(tree: pd.DataFrame) -> np.ndarray:
    """``total_ns`` raised so every node is at least the sum of its children: an icicle with
    ``branchvalues="total"`` draws nothing if a child (GPU time under its launch call) outgrows it."""
    ids = tree["id"].tolist()
    parent = dict(zip(ids, tree["parent"].tolist()))
    value = dict(zip(ids, tree["total_ns"].astype("int64").tolist()))
    depth: dict = {}
    for node in ids:
        chain = []
        while node not in depth and node in parent:
            chain.append(node)
            node = parent[node]
            if len(chain) > len(ids):
                raise ConfigError(f"flame tree: parent links form a cycle through node {node}")
        base = depth.get(node, -1)
        for k, n in enumerate(reversed(chain)):
            depth[n] = base + 1 + k
    children_sum: dict = {}
    for node in sorted(ids, key=depth.__getitem__, reverse=True):
        value[node] = max(value[node], children_sum.get(node, 0))
        p = parent[node]
        if p in value:
            children_sum[p] = children_sum.get(p, 0) + value[node]
    return np.array([value[i] for i in ids], dtype=np.int64)


def flame_figure(
    tree: pd.DataFrame,
    *,
    title: str | None = None,
    max_nodes: int = 2_000,
    max_depth: int | None = None,
) -> go.Figure:
    """An icicle of the flame tree: width = ``total_ns``, color = kind, ids as text (a root's parent
    ""); ``max_depth`` limits the levels shown at once (click to zoom)."""
    require_columns(tree, TREE_COLUMNS, "flame tree:", "a node table from workbench.analysis.flame")
    if len(tree) == 0 or int(tree["total_ns"].max() or 0) <= 0:
        return empty_figure("empty flame tree: no events to attribute", title or "Flame graph")
    shown, share, cut = fit_tree(tree, max_nodes)
    keys = [kind_key(k, n) for k, n in zip(shown["kind"].tolist(), shown["name"].tolist())]
    fig = go.Figure(_icicle(shown, keys, max_depth))
    gpu = gpu_work_by_stage(tree)
    if len(gpu):
        fig.update_traces(domain=dict(x=[0, 1], y=[GPU_PANEL + GPU_GAP, 1]))
        keys += _add_gpu_panel(fig, gpu)
    legend = kind_legend(keys)
    fig.add_annotation(text=legend, y=1.0, align="left", **ABOVE)
    if len(gpu):
        total = format_ns(int(gpu["gpu_ns"].sum()))
        text = f"GPU work per stage: kernels and copies (width = GPU time, {total} in all)"
        fig.add_annotation(text=text, y=GPU_PANEL + 0.01, align="left", name="gpu panel", **ABOVE)
    default = "Flame graph"
    if share is not None:
        of = "of the total" if gpu.empty else "of the host and of the GPU time"
        end = "; deepest levels not drawn)" if cut else ")"
        default += f" ({len(tree)} nodes; under {100 * share:g}% {of} folded into (other){end}"
    harness = tree.attrs.get("cut")  # harness and instrumentation cut by analysis.flame.harness_cut
    # the note is the title's subtitle: in the title's text plotly clipped a multi-line title's first line
    note = textwrap.wrap(harness["note"], NOTE_CHARS) if harness else []
    fig = layout(
        fig,
        title or default,
        margin=dict(l=10, r=10, t=80 + 20 * len(note) + 16 * legend.count("<br>"), b=10),
        uniformtext=SMALL_LABELS_HIDDEN,
    )
    if note:
        fig.update_layout(title_subtitle_text="<br>".join(note))
    return fig


def _icicle(shown: pd.DataFrame, keys: list[str], max_depth: int | None) -> go.Icicle:
    """The host tree's icicle: ids and parents as text, values the displayed totals, colored by kind."""
    parents = shown["parent"].astype("int64").to_numpy()
    return go.Icicle(
        ids=shown["id"].astype(str).tolist(),
        parents=["" if p == -1 else str(p) for p in parents],
        labels=[_clip(n, LABEL_CHARS) for n in shown["name"].astype(str)],
        values=display_totals(shown),
        branchvalues="total",
        sort=False,
        maxdepth=max_depth if max_depth else -1,
        marker=dict(colors=[KIND_COLORS[k] for k in keys]),
        customdata=_hover_rows(shown, keys, ["total_ns", "self_ns"]),
        hovertemplate="%{customdata[0]}<br>%{customdata[1]}<br>total %{customdata[2]} (%{percentRoot:.1%} of all)"
        "<br>self %{customdata[3]}<br>count %{customdata[4]}<br>bytes %{customdata[5]}<extra></extra>",
        tiling=dict(orientation="v"),
        root=dict(color="#ffffff"),
    )


def _add_gpu_panel(fig: go.Figure, gpu: pd.DataFrame) -> list[str]:
    """The GPU work icicle (stage -> kernel/copy, width = GPU time); the palette keys it uses."""
    stages = gpu.groupby("stage", sort=False).agg(gpu_ns=("gpu_ns", "sum"), count=("count", "sum"))
    keys = [kind_key(k, n) for k, n in zip(gpu["kind"].tolist(), gpu["name"].tolist())]
    ids = [f"gpu:{s}" for s in stages.index] + [f"gpu:{s}:{i}" for i, s in enumerate(gpu["stage"])]
    names = [
        _wrap(kernel_label(n) if k == "kernel" else n) for n, k in zip(gpu["name"], gpu["kind"])
    ]
    fig.add_icicle(
        ids=ids,
        parents=[""] * len(stages) + [f"gpu:{s}" for s in gpu["stage"]],
        labels=[*stages.index, *names],
        values=[*stages["gpu_ns"].tolist(), *gpu["gpu_ns"].tolist()],
        branchvalues="total",
        sort=False,
        name="GPU work",
        marker=dict(colors=[KIND_COLORS["stage"]] * len(stages) + [KIND_COLORS[k] for k in keys]),
        customdata=[
            [s, "stage", format_ns(t), str(c), "-"]
            for s, t, c in zip(stages.index, stages["gpu_ns"], stages["count"])
        ]
        + _hover_rows(gpu, keys, ["gpu_ns"]),
        hovertemplate="%{customdata[0]}<br>%{customdata[1]}<br>GPU %{customdata[2]} (%{percentRoot:.1%} of the "
        "stage)<br>count %{customdata[3]}<br>bytes %{customdata[4]}<extra></extra>",
        tiling=dict(orientation="v"),
        domain=dict(x=[0, 1], y=[0, GPU_PANEL]),
        pathbar=dict(visible=False),
    )
    return keys


def _wrap(label: str) -> str:
    """A GPU box label on at most :data:`GPU_LABEL_LINES` lines of :data:`GPU_LABEL_CHARS`."""
    lines = textwrap.wrap(label, GPU_LABEL_CHARS, break_long_words=True, break_on_hyphens=False)
    if len(lines) > GPU_LABEL_LINES:
        lines = lines[:GPU_LABEL_LINES]
        lines[-1] = _clip(lines[-1] + "…", GPU_LABEL_CHARS)
    return "<br>".join(lines)


def kernel_label(name: str) -> str:
    """A kernel's name without ``void``, ``at::native::``, anonymous namespaces and its parameter list."""
    text = (
        name.removeprefix("void ")
        .replace("(anonymous namespace)::", "")
        .replace("at::native::", "")
    )
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0 and i > 0:
            return text[:i]
    return text


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _hover_rows(table: pd.DataFrame, keys: list[str], times: list[str]) -> list[list[str]]:
    """Per node: its name, kind, each of the ``times`` columns (ns), count and bytes, as text."""
    nbytes = table["bytes"].astype("Float64").to_numpy(dtype="float64", na_value=np.nan)
    columns = (table["name"].astype(str), keys, table["count"], nbytes, *(table[t] for t in times))
    return [
        [_clip(n, HOVER_CHARS), KIND_LABELS[k], *map(format_ns, ts), str(c)]
        + [format_bytes(b) if b > 0 else "-"]
        for n, k, c, b, *ts in zip(*columns)
    ]


def kind_legend(keys: list[str]) -> str:
    """HTML lines (of :data:`LEGEND_CHARS`) of colored squares and names of the kinds present."""
    out, width = "", 0
    for k in [k for k in KIND_COLORS if k in set(keys)]:
        entry = f"■ {KIND_LABELS[k]}"
        if width and width + 3 + len(entry) > LEGEND_CHARS:
            out, width = out + "<br>", 0
        elif width:
            out, width = out + "   ", width + 3
        out += f'<span style="color:{KIND_COLORS[k]}">■</span> {KIND_LABELS[k]}'
        width += len(entry)
    return out


def trace_flame_figure(events: Trace | pd.DataFrame, **kwargs) -> go.Figure:
    """:func:`flame_figure` (and its keywords) of ``workbench.analysis.flame.flame_tree(events)``."""
    if Trace.of(events).events.empty:
        return empty_figure("no events in this trace", kwargs.get("title") or "Flame graph")
    return flame_figure(flame_tree(events), **kwargs)


def differential_flame_figure(
    stacks: dict | None, stage: str | None = None, *, title: str | None = None
) -> go.Figure:
    """The slow requests' stacks against the median ones in one stage (default: the headline's):
    widths are the tail set's shares of the samples, colour the tail share minus the median share.
    ``stacks``: the ``stacks`` object of ``show --json`` (:mod:`workbench.analysis.stacks`)."""
    stages = (stacks or {}).get("stages") or {}
    if stage is None and stages:
        named = (stacks.get("headline") or "").split(",")[0]
        stage = named if named in stages else next(iter(stages))
    tree = stages[stage]["tree"] if stage in stages else []
    samples = stages[stage]["samples"] if tree else {}
    counts = (samples.get((stacks or {}).get("tail_set"), 0), samples.get("median", 0))
    told = f"{counts[0]} slow and {counts[1]} median samples"
    # too few: shares of 0 or 1 samples drew one solid box
    why = (
        "no sampled stacks in this run (profile with stack sampling on)"
        if not stages
        else f"no sampled stacks in stage {stage!r}"
        if not tree
        else f"too few sampled stacks in {stage} to compare: {told} (at least {MIN_STACK_SAMPLES} each)"
        if min(counts) < MIN_STACK_SAMPLES
        else None
    )
    if why:
        return empty_figure(why, title or "Slow minus median")
    label = "1 %" if stacks.get("tail_set") == "slowest_1pct" else "5 %"
    growth = [n["tail"] - n["median"] for n in tree]
    trace = _difference_trace(
        tree,
        [max(n["tail"], 1e-9) for n in tree],
        growth,
        1,
        dict(colorbar=dict(title="slow - median", tickformat=".0%")),
        customdata=[[n["tail"], n["median"], g] for n, g in zip(tree, growth)],
        hovertemplate=(
            f"%{{label}}<br>slowest {label}: %{{customdata[0]:.1%}}<br>median: %{{customdata[1]:.1%}}"
            "<br>slow - median: %{customdata[2]:+.1%}<extra></extra>"
        ),
    )
    default = f"{stage}: slowest {label} minus median (sampled stacks; {told})"
    margin = dict(l=10, r=10, t=80, b=10)
    return layout(
        go.Figure(trace), title or default, margin=margin, uniformtext=SMALL_LABELS_HIDDEN
    )


def traced_tail_figure(view: dict | None, *, title: str | None = None) -> go.Figure:
    """The slowest traced requests' flame graph coloured by their difference to the median (ms)."""
    tree = (view or {}).get("tree") or []
    if not tree:
        return empty_figure(
            (view or {}).get("note") or "no traced request", title or "Slowest traced requests"
        )
    diff_ms = [ns_to_ms(n["slow_ns"] - n["median_ns"]) for n in tree]
    keys = [kind_key(n["kind"], n["name"]) for n in tree]
    trace = _difference_trace(
        tree,
        [max(n["slow_ns"], 1) for n in tree],
        diff_ms,
        max(abs(d) for d in diff_ms) or 1.0,
        dict(colorbar=dict(title="slow - median (ms)")),
        customdata=[
            [format_ns(n["slow_ns"]), format_ns(n["median_ns"]), KIND_LABELS[k]]
            for n, k in zip(tree, keys)
        ],
        hovertemplate="%{label}<br>%{customdata[2]}<br>slowest: %{customdata[0]} per request<br>median: "
        "%{customdata[1]} per request<extra></extra>",
    )
    return layout(
        go.Figure(trace),
        (title or "Slowest traced requests against the median ones")
        + f"<br><sup>{view['note']}</sup>",
        margin=dict(l=10, r=10, t=90, b=10),
        uniformtext=SMALL_LABELS_HIDDEN,
    )


def _difference_trace(tree: list[dict], values, diff, limit: float, scale: dict, **kw) -> go.Icicle:
    """An icicle of ``tree`` coloured red (slower) to blue by ``diff`` in ``[-limit, limit]``."""
    kw.setdefault("labels", [_clip(n["name"], LABEL_CHARS) for n in tree])
    marker = dict(
        colors=diff, colorscale="RdBu", reversescale=True, cmid=0, cmin=-limit, cmax=limit
    )
    return go.Icicle(
        ids=[str(n["id"]) for n in tree],
        parents=["" if n["parent"] == -1 else str(n["parent"]) for n in tree],
        values=values,
        branchvalues=kw.pop("branchvalues", "remainder"),
        sort=False,
        marker=marker | scale,
        tiling=dict(orientation="v"),
        **kw,
    )


TITLES = {"work": "work (on CPU)", "waits": "waits"}


def wait_flame_figure(flames: dict[str, Any] | None, *, title: str | None = None) -> go.Figure:
    """The slowest requests' work beside their waits (:func:`workbench.analysis.waits.wait_flames`):
    two differential icicles, on CPU and waiting, coloured on one slow-minus-median scale (ms)."""
    default = "Slowest requests: work beside waits (slow minus median, ms per request)"
    trees = {k: (flames or {}).get(k) or [] for k in TITLES}
    if not any(trees.values()):
        return empty_figure(
            "no thread samples in this run's stages (sampling on: profile, load and serve)",
            title or default,
        )
    n = flames["requests"]
    # per tree, per node: (slow, median, slow - median), ms per request
    ms = {
        k: [(ns_to_ms(x["tail_ns"]) / n["tail"], ns_to_ms(x["median_ns"]) / n["median"]) for x in t]
        for k, t in trees.items()
    }
    rows = {k: [[s, m, s - m] for s, m in v] for k, v in ms.items()}
    limit = max((abs(r[2]) for rs in rows.values() for r in rs), default=0.0) or 1.0
    fig = make_subplots(
        rows=1, cols=2, specs=[[{"type": "domain"}] * 2], subplot_titles=list(TITLES.values())
    )
    for col, (key, tree) in enumerate(trees.items(), start=1):
        trace = _difference_trace(
            tree,
            [x["tail_ns"] for x in tree],
            [r[2] for r in rows[key]],
            limit,
            dict(showscale=col == 2, colorbar=dict(title="slow - median (ms)")),
            labels=[
                WAIT_WORDS.get(x["name"], x["name"]) if x["kind"] == "class" else x["name"]
                for x in tree
            ],
            branchvalues="total",
            customdata=rows[key],
            hovertemplate="%{label}<br>slow: %{customdata[0]:.3g} ms per request<br>median: "
            "%{customdata[1]:.3g} ms<br>slow - median: %{customdata[2]:+.3g} ms<extra></extra>",
        )
        fig.add_trace(trace, row=1, col=col)
    label = "1 %" if flames["tail_set"] == "slowest_1pct" else "5 %"
    text = title or f"{default}: the slowest {label} ({n['tail']} requests) against the median"
    margin = dict(l=10, r=10, t=90, b=10)
    return layout(fig, text, margin=margin, uniformtext=SMALL_LABELS_HIDDEN)
