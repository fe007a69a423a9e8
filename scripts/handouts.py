"""Export the teaching notebooks, executed, to HTML handouts whose figures draw offline.

    python scripts/handouts.py                      # execute notebooks/0*.ipynb, write build/handouts/*.html
    python scripts/handouts.py --out DIR NB.ipynb   # just these notebooks
    python scripts/handouts.py --no-execute NB      # NB already holds its outputs

nbconvert alone writes no figure: a plotly figure is saved as the
``application/vnd.plotly.v1+json`` mimetype, which its HTML exporter cannot draw,
and a widget needs the widget manager from a CDN. Here every plotly output becomes
a plotly ``<div>`` (plotly.js inline, once per handout) and every widget becomes a
static snapshot of what it showed when the notebook ran: its figures, its HTML
and labels, and each control's value. No file is fetched from the network when
a handout is opened.
"""

from __future__ import annotations

import argparse
import copy
import html
import sys
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
PLOTLY_MIME = "application/vnd.plotly.v1+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CELL_STATE = (
    "workbench_widget_state"  # a cell's widget state when it ran (execute), read by offline
)
CELL_TIMEOUT_S = 600


def execute(path: Path) -> nbformat.NotebookNode:
    """Run ``path`` top to bottom in a fresh kernel from its own folder (as Jupyter does).

    Each cell that displays a widget keeps the widgets' state as it was when that cell finished
    (``cell.metadata[CELL_STATE]``): the notebook's own widget state is the last one, so a cell at
    40 % load showed what a later cell set (an over-capacity p99 of 939 ms).
    """
    import nbclient

    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )

    def keep_state(cell, cell_index, execute_reply) -> None:
        if any(WIDGET_MIME in out.get("data", {}) for out in cell.get("outputs", [])):
            cell.metadata[CELL_STATE] = copy.deepcopy(
                {
                    k: {"model_name": v.get("_model_name"), "state": v}
                    for k, v in client.widget_state.items()
                }
            )

    client.on_cell_executed = keep_state
    client.execute()
    return nb


class _Figures:
    """Turns plotly JSON into ``<div>``s; plotly.js goes inline into the first one only."""

    def __init__(self) -> None:
        self.count = 0

    def div(self, spec: dict) -> str:
        import plotly.io as pio

        fig = pio.from_json(_json(spec), skip_invalid=True)
        self.count += 1
        return pio.to_html(
            fig, include_plotlyjs=self.count == 1, full_html=False, config={"displaylogo": False}
        )


def _json(spec: dict) -> str:
    import json

    return json.dumps({"data": spec.get("data", []), "layout": spec.get("layout", {})})


def _snapshot(model_id: str, state: dict, figures: _Figures, depth: int = 0) -> str:
    """Static HTML of one widget model and its children (what it showed when the notebook ran)."""
    model = state.get(model_id)
    if model is None or depth > 20:
        return ""
    name, values = model.get("model_name", ""), model.get("state", {})
    if name in ("VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel", "AccordionModel", "TabModel"):
        flex = "row" if name == "HBoxModel" else "column"
        inner = "".join(
            _snapshot(c.removeprefix("IPY_MODEL_"), state, figures, depth + 1)
            for c in values.get("children", [])
        )
        return (
            f'<div style="display:flex;flex-direction:{flex};flex-wrap:wrap;gap:6px">{inner}</div>'
        )
    if name == "OutputModel":
        return "".join(
            _bundle(out["data"], figures, state)
            if "data" in out
            else f"<pre>{html.escape(out.get('text', ''))}</pre>"
            for out in values.get("outputs", [])
        )
    if name == "HTMLModel":
        return f"<div>{values.get('value', '')}</div>"
    if name == "LabelModel":
        return f"<div>{html.escape(str(values.get('value', '')))}</div>"
    return _control(name, values)


def _control(name: str, values: dict) -> str:
    """A control drawn at its value, disabled: ``batch size: [slider] <b>2</b>``, a list's choices, a box."""
    if name == "ButtonModel":
        return f"<button disabled>{html.escape(str(values.get('description', '')))}</button>"
    if "value" not in values or name.endswith("StyleModel") or name == "LayoutModel":
        return ""
    value = values["value"]
    labels, index = values.get("_options_labels"), values.get("index")
    drawn = ""
    if labels and isinstance(index, int) and not isinstance(index, bool):
        value = labels[index]  # a selection widget stores its choice as an index
        options = "".join(
            f"<option{' selected' if i == index else ''}>{html.escape(str(o))}</option>"
            for i, o in enumerate(labels)
        )
        drawn = f"<select disabled>{options}</select> "
    elif "Slider" in name and not isinstance(value, list):
        drawn = (
            f'<input type="range" disabled min="{values.get("min", 0)}" max="{values.get("max", 100)}" '
            f'step="{values.get("step", 1)}" value="{value}"> '
        )
        value = _readout(value, values.get("readout_format"))
    elif isinstance(value, bool):
        drawn = f'<input type="checkbox" disabled{" checked" if value else ""}> '
    label = values.get("description") or name.removesuffix("Model")
    return (
        f'<span style="border:1px solid #ccc;border-radius:3px;padding:2px 6px;font-size:90%">'
        f"{html.escape(str(label))}: {drawn}<b>{html.escape(str(value))}</b></span>"
    )


def _readout(value, fmt: str | None) -> str:
    """A slider's value as its readout shows it (``readout_format``, ``.2f`` for a float slider)."""
    try:
        return format(value, fmt or ("d" if isinstance(value, int) else ".2f"))
    except (TypeError, ValueError):
        return str(value)


def _bundle(data: dict, figures: _Figures, state: dict | None = None) -> str:
    if WIDGET_MIME in data:
        return _snapshot(data[WIDGET_MIME]["model_id"], state or {}, figures)
    if PLOTLY_MIME in data:
        return figures.div(data[PLOTLY_MIME])
    if "text/html" in data:
        return (
            data["text/html"] if isinstance(data["text/html"], str) else "".join(data["text/html"])
        )
    return f"<pre>{html.escape(str(data.get('text/plain', '')))}</pre>"


def offline(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of an executed notebook whose figures and widgets are plain HTML outputs."""
    nb = nbformat.from_dict(nb)
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    figures = _Figures()
    for cell in nb.cells:
        own = cell.metadata.pop(CELL_STATE, None) or state  # the state when this cell ran, if kept
        for out in cell.get("outputs", []):
            data = out.get("data")
            if data and (PLOTLY_MIME in data or WIDGET_MIME in data):
                out["data"] = {"text/html": _bundle(data, figures, own)}
    nb.metadata.pop("widgets", None)
    return nb


def to_html(nb: nbformat.NotebookNode) -> str:
    """The handout: nbconvert's lab template, with nothing loaded from outside the file."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="lab")
    exporter.mathjax_url = ""
    body, _ = exporter.from_notebook_node(offline(nb))
    return _drop_remote_scripts(body)


def _drop_remote_scripts(page: str) -> str:
    """Remove ``<script src="http...">`` (and empty ``src``) tags the template adds: the handout works without."""
    import re

    return re.sub(r'<script[^>]*\bsrc="(https?://[^"]*)?"[^>]*>\s*</script>', "", page)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="notebooks (default: notebooks/0*.ipynb)")
    parser.add_argument(
        "--out",
        default=str(REPO / "build" / "handouts"),
        help="output folder (default: build/handouts/)",
    )
    parser.add_argument(
        "--no-execute", action="store_true", help="export the outputs the notebooks already hold"
    )
    args = parser.parse_args(argv)
    paths = [Path(p) for p in args.paths] or sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in paths:
        started = time.perf_counter()
        nb = nbformat.read(path, as_version=4) if args.no_execute else execute(path)
        target = out / f"{path.stem}.html"
        target.write_text(to_html(nb), encoding="utf-8")
        print(
            f"{target}  {target.stat().st_size / 1e6:.1f} MB  {time.perf_counter() - started:.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
