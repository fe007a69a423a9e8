"""A click on a point of the latency-over-run chart shows that request's stages (no browser).

The click arrives as the page's script delivers it: the clicked point as JSON
in the hidden sink's value (ipywidgets syncs the ``Text`` value to the kernel);
the browser half is tests/browser/test_over_run_click.py.
"""

from __future__ import annotations

import itertools
import json

import pytest
from widget_fakes import STAGES, FakeProfile

from workbench.widgets import LatencyExplorer, LiveRuns
from workbench.widgets.latency import CLICK_REFUSED
from workbench.widgets.latency_support import clicked_request
from workbench.widgets.panes import CLICK_CLASS, CLICK_SCRIPT, CLICK_SINK_CLASS, ClickablePane


def click(pane: ClickablePane, **point) -> None:
    """Deliver a click as the page's script does: the point as JSON, with a fresh nonce, in the sink's value."""
    content = {
        "event": "click",
        "nonce": f"1700000000000:{next(NONCES)}",
        "x": None,
        "y": None,
        "customdata": None,
        "curve": 0,
        "point": 0,
    } | point
    pane.sink.value = json.dumps(content)


NONCES = itertools.count(1)


@pytest.fixture
def explorer():
    # synthetic_run: request i's stages are 1, 8 and 3 ms plus i us each, 50 us between; 3 warm-up requests
    return LatencyExplorer(
        "text", live=LiveRuns(profile=FakeProfile(), requests=20, warmup=3), debounce_s=0
    ).wait()


def test_a_click_on_a_point_shows_that_requests_stages(explorer):
    assert explorer.request_picker.value == 22  # the slowest first
    click(explorer.over_run_pane, x=7, y=12.071, customdata=7, curve=0, point=4)
    assert explorer.request_picker.value == 7
    bar = explorer.request_pane.figure.data[0]
    assert list(bar.y) == [*STAGES, "unattributed"]
    assert list(bar.x) == [1.007, 8.007, 3.007, 0.05]
    assert (
        explorer.request_pane.figure.layout.title.text
        == "Stages of request 7: 12.071 ms end to end"
    )
    ring = explorer.over_run_pane.figure.data[-1]
    assert (ring.name, list(ring.x), list(ring.y), list(ring.customdata)) == (
        "request 7",
        [7],
        [12.071],
        [7],
    )
    assert explorer.over_run_pane.clicks == 1
    sent = explorer.over_run_pane.output.outputs[0]["data"][
        "application/vnd.plotly.v1+json"
    ]  # what the page draws
    assert (
        sent["layout"]["title"]["text"] == "Latency over the run"
        and sent["data"][-1]["name"] == "request 7"
    )


def test_a_click_without_customdata_uses_x_and_the_picker_still_drives_the_same_pane(explorer):
    click(explorer.over_run_pane, x=12.0, y=12.086)  # the ring trace of an old figure: x only
    assert (
        explorer.request_pane.figure.layout.title.text
        == "Stages of request 12: 12.086 ms end to end"
    )
    explorer.set(request=3)  # the keyboard path
    assert list(explorer.request_pane.figure.data[0].x) == [1.003, 8.003, 3.003, 0.05]


def test_a_click_on_a_warm_up_point_is_refused_in_the_message_line_and_the_next_click_clears_it(
    explorer,
):
    click(explorer.over_run_pane, x=1, customdata=1)
    assert explorer.request_picker.value == 22
    assert explorer.message_line.level == "warning"
    assert explorer.message_line.text.startswith(
        f"{CLICK_REFUSED} 1: not a successful measured request"
    )
    assert (
        explorer.request_pane.figure.layout.title.text
        == "Stages of request 22: 12.116 ms end to end"
    )
    click(explorer.over_run_pane, x=5, customdata=5)
    assert explorer.message_line.text == ""
    assert (
        explorer.request_pane.figure.layout.title.text
        == "Stages of request 5: 12.065 ms end to end"
    )


def test_a_click_leaves_a_configuration_error_on_the_message_line(explorer):
    explorer.message_line.show("int8 needs the CPU: pick fp32", "error")
    click(explorer.over_run_pane, x=9, customdata=9)
    assert explorer.request_picker.value == 9
    assert (explorer.message_line.level, explorer.message_line.text) == (
        "error",
        "int8 needs the CPU: pick fp32",
    )


def test_other_values_in_the_sink_are_ignored(explorer):
    for value in (
        "not json",
        json.dumps({"event": "hover", "customdata": 4}),
        json.dumps([1, 2]),
        "",
    ):
        explorer.over_run_pane.sink.value = value
    assert explorer.request_picker.value == 22
    assert explorer.over_run_pane.clicks == 0


def test_the_same_point_clicked_twice_is_two_clicks(explorer):
    click(explorer.over_run_pane, x=7, customdata=7)
    explorer.set(request=3)
    click(explorer.over_run_pane, x=7, customdata=7)
    assert explorer.request_picker.value == 7
    assert explorer.over_run_pane.clicks == 2


@pytest.mark.parametrize(
    "point, expected",
    [
        ({"customdata": 7, "x": 3}, 7),
        ({"customdata": [8], "x": 8}, 8),
        ({"customdata": None, "x": 4.0}, 4),
        ({"customdata": None, "x": 4.5}, None),
        ({"customdata": "7", "x": None}, None),
        ({"customdata": True}, None),
    ],
)
def test_clicked_request_reads_customdata_then_x(point, expected):
    assert clicked_request(point) == expected


def test_the_script_finds_the_plot_and_the_sink_inside_its_own_pane():
    pane = ClickablePane(360)
    assert CLICK_CLASS in pane.view._dom_classes and CLICK_SINK_CLASS in pane.sink._dom_classes
    assert pane.view.children == (pane.output, pane.sink, pane.script)
    assert pane.sink.layout.display == pane.script.layout.display == "none"
    html = pane.script.outputs[0]["data"]["text/html"]
    assert html == CLICK_SCRIPT
    assert f"closest('.{CLICK_CLASS}')" in html and f"'.{CLICK_SINK_CLASS} input'" in html
    assert "plotly_click" in html and "new Event('change'" in html
    assert (
        "http" not in html and "import " not in html and "src=" not in html
    )  # nothing fetched: works offline
