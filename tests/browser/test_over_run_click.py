"""A click on a point of the latency-over-run chart shows that request's stages, in a real browser, offline.

Voila serves the latency explorer as ``make dashboard`` does (the fixtures of
test_dashboard.py: every request outside 127.0.0.1 is aborted). The test
clicks the fastest measured request's point with the mouse and waits for the
stage pane to show that request, with the stage times of the recorded run it
came from. The click travels through the pane's inline script and hidden
``Text`` sink (workbench.widgets.panes): no lab extension beyond ipywidgets'
and plotly's, and no request for one.
"""

from __future__ import annotations

import re

import pytest

from test_dashboard import (
    FIRST_VIEW_TIMEOUT_MS,
    PLOTS,
    REPO,
    full_screenshot,
    outside_requests,
    page,
    voila,
    wait_for_plots,
)

pytestmark = pytest.mark.browser
__all__ = ["page", "voila"]  # fixtures, imported to be used here

OVER_RUN = "Latency over the run"
STAGES = "Stages of request"


def plot_js(title: str) -> str:
    """JavaScript: the plot whose title starts with ``title``."""
    return f"Array.from({PLOTS}).find(el => el.layout && el.layout.title && (el.layout.title.text || '').startsWith({title!r}))"


def fastest_point(page) -> dict:
    """The fastest point of the "measured" trace: its request id and its page coordinates (px)."""
    return page.evaluate(f"""() => {{
        const gd = {plot_js(OVER_RUN)};
        gd.scrollIntoView({{block: 'center'}});  // Voila scrolls inside a container: bring the chart on screen
        const trace = gd._fullData.find(t => t.name === 'measured');  // decoded arrays (data holds base64)
        const ys = Array.from(trace.y), i = ys.indexOf(Math.min(...ys));
        const fl = gd._fullLayout, box = gd.getBoundingClientRect();
        const x = Array.from(trace.x)[i], y = ys[i];
        return {{request: Array.from(trace.customdata)[i], ms: y,
                 px: box.left + fl._size.l + fl.xaxis.l2p(x), py: box.top + fl._size.t + fl.yaxis.l2p(y)}};
    }}""")


def stage_pane(page) -> dict:
    return page.evaluate(f"""() => {{ const gd = {plot_js(STAGES)};
        return {{title: gd.layout.title.text, names: Array.from(gd._fullData[0].y), ms: Array.from(gd._fullData[0].x)}}; }}""")


def expected_stages(folder: str, request: int) -> tuple[list[str], list[float], float]:
    """Stage names and ms of one request of a recorded run, straight from its files (unattributed last)."""
    from workbench.record import load_run

    run = load_run(REPO / "data" / "runs" / folder)
    order = list(run.meta.stages or dict.fromkeys(run.stages["stage"]))
    mine = run.stages[run.stages["request"] == request].groupby("stage")["dur_ns"].sum()
    e2e_ns = int(run.requests.loc[run.requests["request"] == request, "dur_ns"].iloc[0])
    names = [s for s in order if s in mine.index]
    values_ns = [int(mine[s]) for s in names]
    return (
        names + ["unattributed"],
        [v / 1e6 for v in values_ns] + [(e2e_ns - sum(values_ns)) / 1e6],
        e2e_ns / 1e6,
    )


def test_a_click_on_a_slow_point_shows_its_stages_offline(voila, page):
    base = voila[0]
    extensions = set()
    page.on(
        "request",
        lambda r: (
            "/labextensions/" in r.url
            and extensions.add(r.url.split("/labextensions/")[1].split("/static/")[0])
        ),
    )
    page.goto(f"{base}/voila/render/latency_explorer.ipynb", timeout=FIRST_VIEW_TIMEOUT_MS)
    wait_for_plots(page, 3)
    page.wait_for_function(
        f"() => {plot_js(OVER_RUN)} && {plot_js(STAGES)}", timeout=FIRST_VIEW_TIMEOUT_MS
    )
    assert not any("anywidget" in name for name in extensions), (
        f"lab extensions loaded: {sorted(extensions)}"
    )
    before = stage_pane(page)
    point = fastest_point(page)
    assert not before["title"].startswith(
        f"{STAGES} {point['request']}:"
    )  # the slowest is shown first
    page.mouse.move(point["px"], point["py"])
    page.wait_for_timeout(300)  # plotly picks the point on hover before the click
    page.mouse.click(point["px"], point["py"])
    page.wait_for_function(
        f"() => ({plot_js(STAGES)}).layout.title.text.startsWith({STAGES + ' ' + str(point['request']) + ':'!r})",
        timeout=30_000,
    )
    after = stage_pane(page)
    status = page.inner_text("body")
    recorded = re.search(r"recorded run (\S+) \(", status)
    if recorded:  # the first view is a recorded run: its own files give the exact stage times
        names, ms, e2e_ms = expected_stages(recorded.group(1), int(point["request"]))
        assert after["names"] == names
        assert after["ms"] == pytest.approx(ms, abs=1e-9)
        assert after["title"] == f"{STAGES} {point['request']}: {e2e_ms:.3f} ms end to end"
    else:  # measured here: the bars still add up to the clicked point's end to end
        assert sum(after["ms"]) == pytest.approx(point["ms"], abs=1e-6)
    picked = page.evaluate(f"() => {plot_js(OVER_RUN)}.data.slice(-1)[0].name")
    assert picked == f"request {point['request']}"  # the ring moved with it
    full_screenshot(page, "over_run_click.png")
    assert outside_requests(page) == [], (
        f"the page needs outside resources: {outside_requests(page)}"
    )
