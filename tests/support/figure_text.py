"""What a reader sees of a plotly figure in a browser: its text boxes, judged for overlap, clipping and size.

Shared by the browser tests of the static page and of every notebook's and dashboard's
handout (``tests/browser/test_figure_overlap.py``). :data:`BOXES_JS` reads, for the figure
``<div>`` of the id it is given (else every ``.plotly-graph-div`` of the page), the screen box and drawn font size of each
text: titles, axis titles, legend entries (text and swatch), annotations (badges and
subplot titles included), colour bar titles, text written on the data (bar and slice
labels) and tick labels (grouped per axis). :func:`problems` turns one figure's boxes
into the list of what a reader cannot read.
"""

from __future__ import annotations

MIN_TEXT_PX = 10.0  # the smallest drawn font a student reads on a 1280x800 laptop screen

BOXES_JS = r"""
(id) => {
  const shown = el => { for (let e = el; e && e.tagName !== 'svg'; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden' || parseFloat(s.opacity) === 0) return false; }
    return true; };
  const figures = [];
  const divs = id ? [document.getElementById(id)] : [...document.querySelectorAll('.plotly-graph-div')];
  divs.forEach((div, index) => {
    const frame = div.getBoundingClientRect();
    const out = [];
    const box = (el, group) => { const r = el.getBoundingClientRect(); if (!r.width || !r.height || !shown(el)) return;
      const m = el.getScreenCTM && el.getScreenCTM();
      const scale = m ? Math.hypot(m.a, m.b) : 1;
      const size = el.tagName === 'text' ? parseFloat(getComputedStyle(el).fontSize) * scale : null;
      out.push({group, text: el.textContent.trim(), size, x0: r.left, y0: r.top, x1: r.right, y1: r.bottom}); };
    const labels = ['.gtitle', '.gtitle-subtitle', '.xtitle', '.ytitle', '.legendtext', '.annotation-text',
                    '.cbtitle text', '.legendtitletext'];
    for (const sel of labels) div.querySelectorAll(sel).forEach(el => { if (el.textContent.trim()) box(el, 'label'); });
    div.querySelectorAll('.legend .legendpoints, .legend .legendsymbols').forEach(el => box(el, 'swatch'));
    div.querySelectorAll('text.bartext, text.slicetext, .textpoint text').forEach(el => {
      if (el.textContent.trim()) box(el, 'data'); });
    div.querySelectorAll('.xaxislayer-above, .yaxislayer-above, .cbaxis').forEach((layer, i) =>
      layer.querySelectorAll('text').forEach(el => { if (el.textContent.trim()) box(el, 'ticks' + i); }));
    const title = div.querySelector('.gtitle');
    figures.push({index, title: title ? title.textContent : '',
                  frame: {x0: frame.left, y0: frame.top, x1: frame.right, y1: frame.bottom}, boxes: out});
  });
  return figures;
}
"""


def _meet(a: dict, b: dict) -> bool:
    """The boxes intersect by more than 1 px each way; text on the data also when less than 2 px apart.

    Bar labels side by side with no gap read as one number ("+475.9%+426.0%+366.3%").
    """
    near = -2 if "data" in (a["group"], b["group"]) else 1
    return (
        min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > near
        and min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > 1
    )


def _judged(a: dict, b: dict) -> bool:
    """Pairs judged: labels, swatches and data text with each other; tick labels within their own axis.

    A tick label against a title is left to plotly's automargin; a legend swatch against its own
    text cannot meet; data text (bar labels) is judged against labels and other data text.
    """
    ga, gb = a["group"], b["group"]
    if ga.startswith("ticks") or gb.startswith("ticks"):
        return ga == gb
    return not (ga == gb == "swatch")


def overlaps(boxes: list[dict]) -> list[tuple[str, str]]:
    """Pairs of texts (or a text and a legend swatch) whose boxes intersect."""
    return [
        (a["text"] or a["group"], b["text"] or b["group"])
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if _judged(a, b) and _meet(a, b)
    ]


def clipped(frame: dict, boxes: list[dict]) -> list[str]:
    """Texts that leave the figure's frame."""
    return [
        b["text"]
        for b in boxes
        if b["x0"] < frame["x0"] - 1
        or b["x1"] > frame["x1"] + 1
        or b["y0"] < frame["y0"] - 1
        or b["y1"] > frame["y1"] + 1
    ]


def too_small(boxes: list[dict], min_px: float = MIN_TEXT_PX) -> list[str]:
    """Texts drawn smaller than ``min_px`` (font size times the text's scale on screen)."""
    return [
        f"{b['text']} ({b['size']:.1f} px)"
        for b in boxes
        if b["size"] and b["size"] < min_px - 0.05
    ]


def problems(figure: dict) -> list:
    """Everything unreadable in one figure of :data:`BOXES_JS`: overlaps, clipped and small texts."""
    boxes = figure["boxes"]
    return (
        overlaps(boxes)
        + [("clipped", t) for t in clipped(figure["frame"], boxes)]
        + [("smaller than 10 px", t) for t in too_small(boxes)]
    )
