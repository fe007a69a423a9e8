"""The slowest requests' work beside their waits: two differential flame graphs side by side.

Draws :func:`workbench.analysis.wait_flame.wait_flames`: left the samples on CPU (``stage ->
frames``), right the waits (``stage -> class -> frames``: ``waiting on a lock -> record``). Widths
are the tail set's time per request; colour is the tail set's ms per request minus the median
set's, red where the slow requests spend more, blue where less, on one scale for both.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analysis.waits import WAIT_WORDS
from ..units import ns_to_ms
from .flame import SMALL_LABELS_HIDDEN
from .style import empty_figure, layout

TITLES = {"work": "work (on CPU)", "waits": "waits"}


def wait_flame_figure(flames: dict[str, Any] | None, *, title: str | None = None) -> go.Figure:
    """Work and waits of the slowest requests against the median ones (module docstring); a figure
    saying why there is none for a run without sampled threads."""
    default = "Slowest requests: work beside waits (slow minus median, ms per request)"
    trees = {k: (flames or {}).get(k) or [] for k in TITLES}
    if not any(trees.values()):
        return empty_figure(
            "no thread samples in this run's stages (sampling on: profile, load and serve)",
            title or default,
        )
    n = flames["requests"]
    diffs = {
        k: [ns_to_ms(x["tail_ns"]) / n["tail"] - ns_to_ms(x["median_ns"]) / n["median"] for x in t]
        for k, t in trees.items()
    }
    limit = max((abs(d) for ds in diffs.values() for d in ds), default=0.0) or 1.0
    fig = make_subplots(
        rows=1, cols=2, specs=[[{"type": "domain"}] * 2], subplot_titles=list(TITLES.values())
    )
    for col, (key, tree) in enumerate(trees.items(), start=1):
        fig.add_trace(_icicle(tree, diffs[key], n, limit, show_scale=col == 2), row=1, col=col)
    label = "1 %" if flames["tail_set"] == "slowest_1pct" else "5 %"
    text = title or f"{default}: the slowest {label} ({n['tail']} requests) against the median"
    fig.update_layout(uniformtext=SMALL_LABELS_HIDDEN)
    return layout(fig, text, margin=dict(l=10, r=10, t=90, b=10))


def _icicle(tree: list[dict], diff: list[float], n: dict, limit: float, show_scale: bool):
    labels = [
        WAIT_WORDS.get(x["name"], x["name"]) if x["kind"] == "class" else x["name"] for x in tree
    ]
    per_request = [
        [ns_to_ms(x["tail_ns"]) / n["tail"], ns_to_ms(x["median_ns"]) / n["median"], d]
        for x, d in zip(tree, diff)
    ]
    marker = dict(
        colors=diff, colorscale="RdBu", reversescale=True, cmid=0, cmin=-limit, cmax=limit
    )
    return go.Icicle(
        ids=[str(x["id"]) for x in tree],
        parents=["" if x["parent"] == -1 else str(x["parent"]) for x in tree],
        labels=labels,
        values=[x["tail_ns"] for x in tree],
        branchvalues="total",
        sort=False,
        marker=marker | dict(showscale=show_scale, colorbar=dict(title="slow - median (ms)")),
        tiling=dict(orientation="v"),
        customdata=per_request,
        hovertemplate="%{label}<br>slow: %{customdata[0]:.3g} ms per request<br>median: "
        "%{customdata[1]:.3g} ms<br>slow - median: %{customdata[2]:+.3g} ms<extra></extra>",
    )
