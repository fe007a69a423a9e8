"""Display surfaces of the explorers: figure panes (plotly MIME bundles, plotly.js from the wheel)
and a message line. Clicks come back through :func:`page_bridge`, not ``FigureWidget`` or
``anywidget``: their lab extension left Voila pages opened together without widgets.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
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
    """The MIME bundle of a figure: plotly JSON and a text fallback. A figure without its own
    ``layout.height`` gets ``height`` (px): drawn before its output is on the page, plotly would
    measure a zero-height container and stay collapsed."""
    spec = json.loads(pio.to_json(fig, validate=False))
    spec.setdefault("layout", {}).setdefault("height", height)
    spec["config"] = PLOT_CONFIG
    title = (fig.layout.title.text or "figure") if fig.layout.title else "figure"
    return {PLOTLY_MIME: spec, "text/plain": f"<plotly figure: {title}>"}


class FigurePane:
    """One figure slot: ``view`` (a widget, updated in place) and ``figure`` (what it shows, for code
    to read); ``show(fig, bundle)`` with a cached ``bundle`` skips the JSON encoding."""

    def __init__(self, height: int = 420):
        self.figure = go.Figure()
        self.height = height
        self.output = widgets.Output(layout=widgets.Layout(min_height=f"{height}px", width="100%"))
        self.view: widgets.Widget = self.output  # what a layout places (a subclass may wrap it)
        self.updates = 0

    def show(self, fig: go.Figure, bundle: dict[str, Any] | None = None) -> None:
        self.figure = fig
        self._draw(fig, bundle)
        self.updates += 1

    def _draw(self, fig: go.Figure, bundle: dict[str, Any] | None) -> None:
        data = bundle if bundle is not None else figure_bundle(fig, self.height)
        self.output.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)

    def clear(self) -> None:
        self.output.outputs = ()


class DeferredPane(FigurePane):
    """A :class:`FigurePane` whose figure reaches the page only while its toggle ``button`` is down,
    for a heavy figure below the first screen (the flame graph)."""

    def __init__(self, height: int = 420, label: str = "show the figure"):
        super().__init__(height)
        self.button = widgets.ToggleButton(
            value=False,
            description=label,
            icon="chevron-right",
            layout=widgets.Layout(width="auto", align_self="flex-start"),  # not the row's width
        )
        self.output.layout.display = "none"
        self.view = widgets.VBox([self.button, self.output], layout=widgets.Layout(width="100%"))
        self._unsent = False  # a figure shown while closed, sent once opened
        self.button.observe(self._toggled, "value")

    @property
    def opened(self) -> bool:
        return bool(self.button.value)

    @property
    def figure(self) -> go.Figure:
        """The last figure shown (built now if it was only promised by ``show_later``)."""
        return self._built()[0]

    @figure.setter
    def figure(self, fig: go.Figure) -> None:
        self._made = (fig, None)

    def show(self, fig: go.Figure, bundle: dict[str, Any] | None = None) -> None:
        self.show_later(lambda: (fig, bundle))

    def show_later(self, make: Callable[[], tuple[go.Figure, dict[str, Any] | None]]) -> None:
        """Show the figure ``make()`` returns, built only when the pane is opened or ``figure`` is read."""
        self._make, self._made, self._unsent = make, None, True
        self.updates += 1
        self._send()

    def clear(self) -> None:
        self._unsent = False
        super().clear()

    def _built(self) -> tuple[go.Figure, dict[str, Any] | None]:
        if self._made is None:
            self._made = self._make()
        return self._made

    def _toggled(self, change: dict) -> None:
        opened = bool(change["new"])
        self.button.icon = "chevron-down" if opened else "chevron-right"
        self.output.layout.display = "" if opened else "none"
        self._send()

    def _send(self) -> None:
        if self.opened and self._unsent:
            self._unsent = False
            self._draw(*self._built())


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
        self.view.value = (
            f'<div class="workbench-{level}" style="{style}">{html.escape(text)}</div>'
        )

    def clear(self) -> None:
        self.show("")


CLICK_CLASS = "workbench-clicks"  # the pane's box; the script looks for plots inside it
CLICK_SINK_CLASS = "workbench-click-sink"  # the hidden Text whose input receives the clicked point
CLICK_SCRIPT = """<script>
(function () {
  var box = document.currentScript && document.currentScript.closest('.__BOX__');
  if (!box || box.__workbenchClicks) return;  // one binder per pane on the page
  box.__workbenchClicks = true;
  var sent = 0;
  function send(p) {
    var input = box.querySelector('.__SINK__ input');
    if (!input) return;
    sent += 1;  // the nonce makes every click a new value, even on the same point twice
    input.value = JSON.stringify({event: 'click', nonce: Date.now() + ':' + sent, x: p.x, y: p.y,
      customdata: p.customdata === undefined ? null : p.customdata, curve: p.curveNumber, point: p.pointNumber});
    input.dispatchEvent(new Event('change', {bubbles: true}));
  }
  var timer = setInterval(function () {
    if (!box.isConnected) { clearInterval(timer); return; }
    box.querySelectorAll('.js-plotly-plot').forEach(function (gd) {
      if (gd.__workbenchClicks || typeof gd.on !== 'function') return;
      gd.__workbenchClicks = true;  // a redraw replaces the plot: each new one is bound once
      gd.on('plotly_click', function (e) { var p = e && e.points && e.points[0]; if (p) send(p); });
    });
  }, 250);
})();
</script>""".replace("__BOX__", CLICK_CLASS).replace("__SINK__", CLICK_SINK_CLASS)
POINT_KEYS = ("x", "y", "customdata", "curve", "point")


def page_bridge(script: str, sink_class: str, what: str) -> tuple[widgets.Text, widgets.Output]:
    """A hidden ``Text`` sink that the page's ``script`` writes into, and the hidden ``Output``
    holding the script (widget outputs are trusted: the page runs it)."""
    sink = widgets.Text(value="", layout=widgets.Layout(display="none"))
    sink.add_class(sink_class)
    out = widgets.Output(layout=widgets.Layout(display="none"))
    data = {"text/html": script, "text/plain": f"<{what}>"}
    out.outputs = ({"output_type": "display_data", "metadata": {}, "data": data},)
    return sink, out


FIRST_CLASS, FIRST_SINK_CLASS = "workbench-first-figure", "workbench-first-sink"
# in the page: once a figure of the box is drawn (or after 10 s without one), "drawn" into the sink
FIRST_SCRIPT = """<script>
(function () {
  var box = document.currentScript && document.currentScript.closest('.__BOX__'), started = Date.now();
  if (!box || box.__workbenchFirst) return;
  box.__workbenchFirst = true;
  var timer = setInterval(function () {
    var input = box.querySelector('.__SINK__ input'), drawn = Array.prototype.some.call(
      box.querySelectorAll('.js-plotly-plot'), function (el) { return el.data && el.data.length; });
    if (!input || (!drawn && Date.now() - started < 10000)) return;
    clearInterval(timer);
    input.value = 'drawn';
    input.dispatchEvent(new Event('change', {bubbles: true}));
  }, 50);
})();
</script>""".replace("__BOX__", FIRST_CLASS).replace("__SINK__", FIRST_SINK_CLASS)


def first_figure_first(box: widgets.Box, until: widgets.Widget) -> widgets.VBox:
    """A box of ``box``'s children up to ``until``, and of the others once the page drew a figure of
    those (or 10 s passed), so the first figure is not drawn in one task with all the rest. Without a
    page running its script (a kernel with no browser) the others stay out: display ``box`` there."""
    children = list(box.children)
    cut = children.index(until) + 1
    rest = widgets.VBox(layout=widgets.Layout(width="100%"))
    sink, script = page_bridge(FIRST_SCRIPT, FIRST_SINK_CLASS, "first figure first")
    sink.observe(lambda _c: setattr(rest, "children", tuple(children[cut:])), "value")
    first = widgets.VBox([*children[:cut], rest, sink, script], layout=box.layout)
    first.add_class(FIRST_CLASS)
    return first


class ClickablePane(FigurePane):
    """A :class:`FigurePane` whose points can be clicked: ``on_click(callback)``, ``callback(point)``
    with plotly.js's ``{"x", "y", "customdata", "curve", "point"}``; ``clicks`` counts them."""

    def __init__(self, height: int = 420):
        super().__init__(height)
        self.sink, self.script = page_bridge(CLICK_SCRIPT, CLICK_SINK_CLASS, "click bridge")
        self.sink.observe(self._received, "value")
        self.view = widgets.VBox(
            [self.output, self.sink, self.script], layout=widgets.Layout(width="100%")
        )
        self.view.add_class(CLICK_CLASS)
        self._callbacks: list = []
        self.clicks = 0

    def on_click(self, callback) -> None:
        """Call ``callback(point)`` on every click on a point of the figure."""
        self._callbacks.append(callback)

    def _received(self, change: dict) -> None:
        try:
            content = json.loads(change["new"] or "null")
        except ValueError:  # not written by the script: ignored
            return
        if not isinstance(content, dict) or content.get("event") != "click":
            return
        self.clicks += 1
        point = {k: content.get(k) for k in POINT_KEYS}
        for callback in self._callbacks:
            callback(point)
