"""Display surfaces of the explorers: a figure pane and a message line.

:class:`FigurePane` is one ``ipywidgets.Output`` updated in place: every
update replaces its single output, the figure as the plotly MIME bundle
(``application/vnd.plotly.v1+json``). JupyterLab and Voila draw that bundle
with the ``jupyterlab-plotly`` extension that ships inside the plotly wheel,
so plotly.js comes from the installed package, never from a CDN (plotly's
own ``FigureWidget`` is not used: see below). Updates assign the output list
directly, which is safe from the explorers' worker thread.

:class:`ClickablePane` adds clicks on points, for the latency-over-run chart:
the figure is drawn exactly as in a :class:`FigurePane`, and a hidden
``anywidget`` of a few lines of JavaScript (:data:`CLICK_ESM`, sent with the
widget, so nothing is fetched from a CDN) listens to plotly.js's documented
``plotly_click`` event on the plot inside its pane and sends the clicked point
to the kernel. We chose this over plotly's ``FigureWidget``: that widget ships
its own 5 MB copy of plotly.js to every page (a second copy, next to the one
the MIME renderer already loaded), re-validates every figure in Python, and
would make this one chart a different kind of pane, outside the explorers'
cache of figure JSON. The bridge polls its pane every 250 ms for a newly drawn
plot (one ``querySelector``) and binds each plot once.
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
        self.output = widgets.Output(layout=widgets.Layout(min_height=f"{height}px", width="100%"))
        self.view: widgets.Widget = self.output  # what a layout places (a subclass may wrap the output)
        self.updates = 0

    def show(self, fig: go.Figure, bundle: dict[str, Any] | None = None) -> None:
        """Draw ``fig`` in the view."""
        self.figure = fig
        data = bundle if bundle is not None else figure_bundle(fig, self.height)
        self.output.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)
        self.updates += 1

    def clear(self) -> None:
        self.output.outputs = ()


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


CLICK_CLASS = "workbench-clicks"  # the pane's box; the bridge looks for the plot inside it
CLICK_ESM = """
function bind(box, model) {
  const gd = box.querySelector('.js-plotly-plot');
  if (!gd || gd.__workbenchClicks || typeof gd.on !== 'function') return;
  gd.__workbenchClicks = true;
  gd.on('plotly_click', (event) => {
    const p = event && event.points && event.points[0];
    if (!p) return;
    model.send({event: 'click', x: p.x, y: p.y, customdata: p.customdata === undefined ? null : p.customdata,
                curve: p.curveNumber, point: p.pointNumber});
  });
}
export default {
  render({ model, el }) {
    el.style.display = 'none';
    const timer = setInterval(() => {  // the plot is redrawn on every update: bind each new one
      const box = el.closest('.__CLASS__');
      if (box) bind(box, model);
    }, 250);
    return () => clearInterval(timer);
  }
};
""".replace("__CLASS__", CLICK_CLASS)


def click_bridge_class():
    """The anywidget class of the click bridge (built on first use: ``import workbench.widgets`` stays light)."""
    global _CLICK_BRIDGE
    if _CLICK_BRIDGE is None:
        try:
            import anywidget
        except ImportError as exc:  # pragma: no cover - anywidget is pinned in requirements.lock
            raise ImportError("clicks on the latency-over-run chart need anywidget: "
                              "pip install -r requirements.lock (anywidget==0.11.0)") from exc

        class ClickBridge(anywidget.AnyWidget):
            """Hidden: forwards ``plotly_click`` of the plot in its pane as a custom message."""
            _esm = CLICK_ESM

        _CLICK_BRIDGE = ClickBridge
    return _CLICK_BRIDGE


_CLICK_BRIDGE = None


class ClickablePane(FigurePane):
    """A :class:`FigurePane` whose points can be clicked: ``on_click(callback)``.

    ``callback(point)`` gets the clicked point as plotly.js describes it:
    ``{"x", "y", "customdata", "curve", "point"}`` (``curve``: trace index).
    ``view`` is a box holding the figure's output and the hidden bridge.
    """

    def __init__(self, height: int = 420):
        super().__init__(height)
        self.bridge = click_bridge_class()()
        self.bridge.on_msg(self._received)
        self.view = widgets.VBox([self.output, self.bridge], layout=widgets.Layout(width="100%"))
        self.view.add_class(CLICK_CLASS)
        self._callbacks: list = []
        self.clicks = 0

    def on_click(self, callback) -> None:
        """Call ``callback(point)`` on every click on a point of the figure."""
        self._callbacks.append(callback)

    def _received(self, _widget, content: dict, _buffers) -> None:
        if not isinstance(content, dict) or content.get("event") != "click":
            return
        self.clicks += 1
        point = {k: content.get(k) for k in ("x", "y", "customdata", "curve", "point")}
        for callback in self._callbacks:
            callback(point)

