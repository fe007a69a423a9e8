"""Display surfaces of the explorers: a figure pane and a message line.

:class:`FigurePane` is one ``ipywidgets.Output`` updated in place: every
update replaces its single output, the figure as the plotly MIME bundle
(``application/vnd.plotly.v1+json``). JupyterLab and Voila draw that bundle
with the ``jupyterlab-plotly`` extension that ships inside the plotly wheel,
so plotly.js comes from the installed package, never from a CDN. (plotly's
own ``FigureWidget`` needs the optional ``anywidget`` package; this pane does
not.) Updates assign the output list directly, which is safe from the
explorers' worker thread.
"""
from __future__ import annotations

import html
import json
from typing import Any

import ipywidgets as widgets
import plotly.graph_objects as go
import plotly.io as pio

PLOTLY_MIME = "application/vnd.plotly.v1+json"
# No "responsive": a responsive plot sizes itself from its container, and a plot drawn before
# Voila has put the output on the page measures zero height and stays collapsed.
PLOT_CONFIG = {"displaylogo": False}
MESSAGE_STYLES = {
    "info": "color:#444",
    "warning": "color:#8a5300;background:#fff4e0;padding:4px 8px;border-left:4px solid #f0a020",
    "error": "color:#8b0000;background:#fdecea;padding:4px 8px;border-left:4px solid #d93025",
}


def figure_bundle(fig: go.Figure, height: int = 420) -> dict[str, Any]:
    """The MIME bundle of a figure: plotly JSON (typed arrays, no numpy) and a text fallback.

    A figure without its own ``layout.height`` gets ``height`` (px): drawn into
    an output that is not on the page yet (the first draw of a dashboard can
    come before the page shows the widget), plotly would measure a zero-height
    container and stay collapsed.
    """
    spec = json.loads(pio.to_json(fig, validate=False))
    spec.setdefault("layout", {}).setdefault("height", height)
    spec["config"] = PLOT_CONFIG
    title = (fig.layout.title.text or "figure") if fig.layout.title else "figure"
    return {PLOTLY_MIME: spec, "text/plain": f"<plotly figure: {title}>"}


class FigurePane:
    """One figure slot of a dashboard: ``view`` (a widget, updated in place) and ``figure`` (what it shows).

    ``show(fig)`` sends ``fig`` to the view (the same widget every time: the
    page does not re-create it) and keeps ``fig`` as ``figure`` for code and
    tests to read. ``bundle`` (from :func:`figure_bundle`) skips the JSON
    encoding when the caller has it cached. ``updates`` counts redraws.
    """

    def __init__(self, height: int = 420):
        self.figure = go.Figure()
        self.height = height
        self.view = widgets.Output(layout=widgets.Layout(min_height=f"{height}px", width="100%"))
        self.updates = 0

    def show(self, fig: go.Figure, bundle: dict[str, Any] | None = None) -> None:
        """Draw ``fig`` in the view."""
        self.figure = fig
        data = bundle if bundle is not None else figure_bundle(fig, self.height)
        self.view.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)
        self.updates += 1

    def clear(self) -> None:
        self.view.outputs = ()


class MessageLine:
    """An HTML line for status, warnings and errors (never a traceback)."""

    def __init__(self):
        self.view = widgets.HTML(value="")
        self.level = "info"
        self.text = ""

    def show(self, text: str, level: str = "info") -> None:
        self.level, self.text = level, text
        if not text:
            self.view.value = ""
            return
        style = MESSAGE_STYLES.get(level, MESSAGE_STYLES["info"])
        self.view.value = f'<div class="workbench-{level}" style="{style}">{html.escape(text)}</div>'

    def clear(self) -> None:
        self.show("")
