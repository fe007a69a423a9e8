"""What the latency explorer's first screen sends to the page (issue 30, first figure fast).

The flame graph (45 of the first view's 70 kB of figure JSON, about 0.2 s of
plotly.js drawing) reaches the page only when its button is pressed; the
latency-over-run chart draws SVG markers for a run of a few hundred requests
(a WebGL context cost the first view 0.15-0.2 s in a browser without a GPU).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from widget_fakes import FakeProfile

from workbench.examples import data_dir
from workbench.plots.tail import GL_ABOVE_POINTS, latency_over_run_figure
from workbench.widgets import LatencyExplorer, LiveRuns
from workbench.widgets.panes import (
    FIRST_CLASS,
    FIRST_SINK_CLASS,
    PLOTLY_MIME,
    DeferredPane,
    first_figure_first,
)

RUNS = data_dir() / "runs"


def sent(pane) -> list[dict]:
    """The figures the pane's output holds (what the page receives)."""
    return [o["data"][PLOTLY_MIME] for o in pane.output.outputs]


def titled(text: str) -> go.Figure:
    return go.Figure(layout={"title": {"text": text}})


def test_a_deferred_pane_keeps_the_figure_and_sends_it_only_once_opened():
    pane = DeferredPane(300, "show it")
    pane.show(titled("first"))
    pane.show(titled("second"))
    assert pane.figure.layout.title.text == "second" and pane.updates == 2
    assert sent(pane) == [] and pane.output.layout.display == "none" and not pane.opened
    pane.button.value = True  # the user presses the button
    (spec,) = sent(pane)
    assert spec["layout"]["title"]["text"] == "second" and spec["layout"]["height"] == 300
    assert pane.output.layout.display == "" and pane.button.icon == "chevron-down"
    pane.show(titled("third"))  # opened: drawn at once
    assert [s["layout"]["title"]["text"] for s in sent(pane)] == ["third"]
    pane.button.value = False  # hidden again; the next figure waits for the button
    pane.show(titled("fourth"))
    assert pane.output.layout.display == "none" and pane.figure.layout.title.text == "fourth"
    assert [s["layout"]["title"]["text"] for s in sent(pane)] == ["third"]
    pane.button.value = True
    assert [s["layout"]["title"]["text"] for s in sent(pane)] == ["fourth"]


def test_the_recorded_first_view_sends_no_flame_graph_until_asked():
    ex = LatencyExplorer("text", runs=RUNS, debounce_s=0).wait()
    assert "recorded run text-cpu-bs1-fp32" in ex.status.value
    flame = ex.flame_pane.figure.to_dict()
    assert flame["data"][0]["type"] == "icicle"  # built, for code to read
    assert sent(ex.flame_pane) == []
    assert all(len(sent(p)) == 1 for p in (ex.budget_pane, ex.tail_pane, ex.over_run_pane))
    ex.flame_pane.button.value = True
    (spec,) = sent(ex.flame_pane)
    assert spec["data"][0]["type"] == "icicle" and spec["layout"]["height"] == 520
    ex.set(batch_size=8).wait()  # opened stays opened: the next run's flame graph is drawn at once
    (spec,) = sent(ex.flame_pane)
    assert spec["layout"]["title"] == ex.flame_pane.figure.to_dict()["layout"]["title"]
    assert ex.flame_pane.figure is ex.current.flame.get()


def test_an_error_clears_a_closed_flame_pane_too():
    ex = LatencyExplorer("text", live=LiveRuns(profile=FakeProfile()), debounce_s=0).wait()
    ex._clear_figures("not run: x")
    fig = ex.flame_pane.figure.to_dict()
    assert fig["data"] == [] and fig["layout"]["annotations"][0]["text"] == "not run: x"
    ex.flame_pane.button.value = True
    (spec,) = sent(ex.flame_pane)
    assert spec["layout"]["annotations"][0]["text"] == "not run: x"


def requests_table(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "request": np.arange(n),
            "warmup": np.arange(n) < 3,
            "ok": np.ones(n, bool),
            "dur_ns": 1_000_000 + np.arange(n) * 1_000,
        }
    )


def test_latency_over_run_draws_svg_markers_up_to_the_limit_and_webgl_above():
    small = latency_over_run_figure(requests_table(GL_ABOVE_POINTS), picked=5).to_dict()
    assert [t["type"] for t in small["data"]] == ["scatter", "scatter", "scatter"]
    big = latency_over_run_figure(requests_table(GL_ABOVE_POINTS + 1)).to_dict()
    assert [t["type"] for t in big["data"]] == ["scattergl", "scattergl"]
    assert [t["name"] for t in big["data"]] == ["measured", "warm-up"]


def test_a_recorded_runs_trace_is_read_only_when_its_flame_graph_is_wanted(monkeypatch):
    import workbench.widgets.latency as latency

    read = []
    real = latency.flame_from_trace
    monkeypatch.setattr(latency, "flame_from_trace", lambda path: read.append(path) or real(path))
    ex = LatencyExplorer("text", runs=RUNS, debounce_s=0).wait()
    ex.set(batch_size=8).wait()
    assert read == [] and ex.flame_pane.updates == 2  # two recorded views, no trace read
    assert ex.flame_pane.figure.to_dict()["data"][0]["type"] == "icicle"  # code reads it: built now
    assert [p.parent.name for p in read] == ["text-cpu-bs8-fp32"] and sent(ex.flame_pane) == []
    ex.set(batch_size=1).wait()  # from the cache: still not read
    ex.flame_pane.button.value = True  # opened: read and drawn
    assert [p.parent.name for p in read] == ["text-cpu-bs8-fp32", "text-cpu-bs1-fp32"]
    assert len(sent(ex.flame_pane)) == 1
    ex.flame_pane.button.value = False
    ex.flame_pane.button.value = True  # the same figure: not read again
    assert len(read) == 2


def test_a_recorded_trace_that_cannot_be_read_says_so_in_the_flame_pane(tmp_path):
    import shutil

    run = tmp_path / "text-cpu-bs1-fp32"
    shutil.copytree(RUNS / "text-cpu-bs1-fp32", run)
    (trace,) = run.glob("*.pt.trace.json.gz")
    trace.write_bytes(b"not gzip")
    ex = LatencyExplorer("text", runs=tmp_path, debounce_s=0).wait()
    assert "recorded run text-cpu-bs1-fp32" in ex.status.value and ex.message == ""
    ex.flame_pane.button.value = (
        True  # read now: the error is the figure's message, not a traceback
    )
    (spec,) = sent(ex.flame_pane)
    (note,) = spec["layout"]["annotations"]
    assert note["text"].startswith("no flame graph: ") and trace.name in note["text"]


def test_the_dashboard_sends_the_budget_first_and_the_other_panes_once_the_page_drew_it():
    """Issue 40: the page drew its 45 widget views and 6 figures in one 2-s task, the first figure at its
    end; the dashboard's box holds the controls and the budget until the page's script says it drew."""
    ex = LatencyExplorer("text", runs=RUNS, debounce_s=0).wait()
    first = first_figure_first(ex.view, until=ex.budget_pane.view)
    controls, *figures = ex.view.children
    cut = figures.index(ex.budget_pane.view) + 1
    rest, sink, script = first.children[-3:]
    assert first.children[:-3] == (controls, *figures[:cut]) and rest.children == ()
    assert FIRST_CLASS in first._dom_classes and FIRST_SINK_CLASS in sink._dom_classes
    assert f"closest('.{FIRST_CLASS}')" in script.outputs[0]["data"]["text/html"]
    assert len(sent(ex.budget_pane)) == 1  # drawn with the first screen
    sink.value = "drawn"  # what the page's script writes once the budget is drawn
    assert rest.children == tuple(figures[cut:])
    assert ex.tail_pane.view in rest.children and ex.compare_pane.view in rest.children
    assert first.layout is ex.view.layout
