"""`make handouts`: an executed notebook becomes HTML whose figures draw offline (scripts/handouts.py)."""
from __future__ import annotations

import re
import sys

import pytest
from nbexec import NOTEBOOKS, REPO

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbconvert")
sys.path.insert(0, str(REPO / "scripts"))
import handouts  # noqa: E402

PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


def count_outputs(nb, mime: str) -> int:
    return sum(mime in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", []))


@pytest.mark.slow
def test_handout_of_notebook_5_draws_its_figures_and_widget_offline(executed):
    nb = executed(next(p for p in NOTEBOOKS if p.name.startswith("05")))
    assert count_outputs(nb, WIDGET) == 1 and count_outputs(nb, PLOTLY) >= 2  # the explorer, and plain figures
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    widget_figures = sum(PLOTLY in out.get("data", {}) for m in state.values() if m["model_name"] == "OutputModel"
                         for out in m["state"].get("outputs", []))
    page = handouts.to_html(nb)
    assert page.count('class="plotly-graph-div"') == count_outputs(nb, PLOTLY) + widget_figures
    assert widget_figures >= 1  # the explorer's figures, as a static snapshot
    assert "measured here in" in page  # the explorer's status label, frozen
    assert len(re.findall(r"Plotly\.newPlot", page)) >= 2 and "plotly.js v" in page  # plotly.js inline, once
    assert page.count("plotly.js v") <= 2
    loaded = re.findall(r'<(?:script|link|img|iframe)[^>]*\b(?:src|href)="(?!data:)([^"]*)"', page)
    assert not loaded, f"the handout loads {loaded[:5]}"
    for marker in (WIDGET, "@jupyter-widgets/html-manager"):  # no widget left for a CDN manager to draw
        at = page.find(marker)
        assert at < 0, f"the handout still holds {marker!r}: ...{page[max(0, at - 300):at + 100]}..."


def test_a_widget_snapshot_shows_its_figure_label_and_control_values():
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=["parse"], y=[1.5]))
    state = {
        "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_label", "IPY_MODEL_pick", "IPY_MODEL_out"]}},
        "label": {"model_name": "LabelModel", "state": {"value": "text cpu bs=2 <int8>"}},
        "pick": {"model_name": "DropdownModel", "state": {"description": "precision", "index": 1,
                                                           "_options_labels": ["fp32", "int8"], "value": None}},
        "out": {"model_name": "OutputModel", "state": {"outputs": [
            {"output_type": "display_data", "data": {PLOTLY: fig.to_plotly_json(), "text/plain": "Figure"}}]}},
    }
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("explorer")
    cell.outputs = [nbformat.v4.new_output("display_data", data={WIDGET: {"model_id": "box", "version_major": 2,
                                                                           "version_minor": 0}})]
    nb.cells = [cell]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": state, "version_major": 2,
                                                                            "version_minor": 0}}
    html = handouts.offline(nb).cells[0].outputs[0]["data"]["text/html"]
    assert "text cpu bs=2 &lt;int8&gt;" in html
    assert "precision: <select disabled><option>fp32</option><option selected>int8</option></select> <b>int8</b>" in html
    assert html.count('class="plotly-graph-div"') == 1 and "parse" in html


def test_each_widget_cell_shows_the_state_it_ran_with_and_its_controls(tmp_path):
    """Issue 40: a snapshot showed the widgets' last state (notebook 06's 40 % load cell showed a later cell's
    over-capacity p99 of 939 ms), its sliders as bare numbers."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import ipywidgets as w\n"
            "s = w.FloatSlider(value=0.4, min=0, max=2, step=0.1, description='load')\n"
            "w.VBox([s, w.Checkbox(value=True, description='stable'), w.Button(description='run')])"
        ),
        nbformat.v4.new_code_cell("s.value = 1.1"),
    ]
    path = tmp_path / "two_states.ipynb"
    nbformat.write(nb, path)
    page = handouts.offline(handouts.execute(path)).cells[0].outputs[0]["data"]["text/html"]
    assert 'load: <input type="range" disabled min="0.0" max="2.0" step="0.1" value="0.4"> <b>0.40</b>' in page
    assert 'stable: <input type="checkbox" disabled checked> <b>True</b>' in page
    assert "<button disabled>run</button>" in page and "1.1" not in page
