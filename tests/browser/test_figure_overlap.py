"""The main figures on a laptop screen (1280x800) in a real browser: no text box overlaps another, none is clipped.

Issue 30: p50/p95/p99 labels overlapped each other and the curve and were
clipped to "2 ms" / ".54 ms" in the static page; log axes read "9 0.1 2 3 ... 1 2".
The static page (``export-dashboard``) draws the same figure builders as the
notebooks and the explorer, so it is the page checked here: for each figure,
the bounding boxes of its titles, axis titles, legend entries, annotations and
tick labels (per axis) are read from the SVG, and no two may intersect, and
none may leave the figure. The test also reports the time from navigation to
the first drawn figure and of a control change, labelled quiet or busy from the
CPUs' use in the 2 s before the browser starts (as ``benchmarks/bench_room.py`` does).

Issue 40: every figure of every teaching notebook and dashboard, as the handout
(``scripts/handouts.py``) draws it at 1280x800: each notebook executed once (shared
with the notebook tests), each dashboard with its widget's first view drawn, one
handout page per notebook in one browser; titles, legends (text and swatch), badges,
annotations and text on the data must not overlap, leave the figure or be drawn
smaller than 10 px (``tests/support/figure_text.py``).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import main_output
from tests.support.figure_text import BOXES_JS
from tests.support.figure_text import problems as unreadable

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
RUNS = REPO / "data" / "runs"
FIGURES = ("budget", "distribution", "flame", "batching")  # the figure <div>s' ids


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    for name in ("text-cpu-bs1-fp32", "text-cpu-bs8-fp32", "text-cuda-bs1-fp32"):
        if not (RUNS / name / "run.json").is_file():
            pytest.skip(f"data/runs/{name} not recorded")
        shutil.copytree(RUNS / name, runs / name)
    out = tmp_path_factory.mktemp("static")
    rc, _, err = main_output(["export-dashboard", "--out", str(out), "--runs", str(runs)])
    assert rc == 0, err
    return out / "index.html"


BUSY_PCT = 25.0  # CPUs busier than this before the run: other work shared the machine


def machine_words(seconds: float = 2.0) -> str:
    """``quiet machine (CPUs 3 % busy in the 2 s before, load average 0.8)`` or ``busy machine (...)``."""
    import os

    from room_server import cpu_busy_pct

    busy = cpu_busy_pct(seconds)
    if busy is None:
        return "machine load not measured (no psutil)"
    state = "busy" if busy > BUSY_PCT else "quiet"
    return (
        f"{state} machine (CPUs {busy:g} % busy in the {seconds:g} s before, "
        f"load average {os.getloadavg()[0]:.2f})"
    )


def test_main_figures_have_no_overlapping_or_clipped_text_at_1280x800(page_file):
    if not CHROMIUM.exists():
        pytest.skip("chromium not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    problems, timings = {}, {}
    machine = machine_words()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-background-networking", "--disable-gpu"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        started = time.perf_counter()
        page.goto(page_file.as_uri())
        page.wait_for_function("document.body.dataset.drawn !== undefined", timeout=60_000)
        timings["first_figure_s"] = time.perf_counter() - started
        for config in ("text|cpu|1|fp32|default", "text|cuda|1|fp32|default"):
            pipeline, device, batch = config.split("|")[:3]
            started = time.perf_counter()
            page.select_option("#device", device)
            page.select_option("#batch_size", batch)
            page.wait_for_function(f"document.body.dataset.drawn === {config!r}", timeout=60_000)
            timings[f"change_to_{device}_s"] = time.perf_counter() - started
            for fig in FIGURES:
                bad = unreadable(page.evaluate(BOXES_JS, fig)[0])
                if bad:
                    problems[f"{config} {fig}"] = bad
        browser.close()
    print(f"static page, {machine}:", {k: round(v, 2) for k, v in timings.items()})
    for key, bad in problems.items():
        print(key, bad)
    assert problems == {}, problems


NOTEBOOK_TESTS = REPO / "tests" / "notebooks"


def executed_notebooks() -> dict[str, object]:
    """Every teaching notebook and every dashboard with its first view drawn, executed (each once per session,
    shared with tests/notebooks)."""
    import os

    sys.path.insert(0, str(NOTEBOOK_TESTS))
    import nbexec

    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    out = {}
    for path in nbexec.NOTEBOOKS + nbexec.DASHBOARDS:
        if path not in nbexec._EXECUTED:
            nbexec._EXECUTED[path] = nbexec.execute(path, env)
        out[path.name] = nbexec._EXECUTED[path][0]
    return out


def handout_problems(page, html: Path) -> tuple[int, dict[str, list]]:
    """(figures drawn, {"#index title": problems}) of one handout page."""
    page.goto(html.as_uri())
    page.wait_for_function(
        "[...document.querySelectorAll('.plotly-graph-div')].every(d => d.querySelector('.main-svg'))",
        timeout=60_000,
    )
    figures = page.evaluate(BOXES_JS, None)
    return len(figures), {
        f"#{f['index']} {f['title'][:70]}": unreadable(f) for f in figures if unreadable(f)
    }


@pytest.mark.slow
def test_every_notebook_and_dashboard_figure_is_readable_at_1280x800(tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("chromium not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    pytest.importorskip("nbconvert")
    sys.path.insert(0, str(REPO / "scripts"))
    import handouts

    pages = {}
    for name, nb in executed_notebooks().items():
        pages[name] = tmp_path / f"{name}.html"
        pages[name].write_text(handouts.to_html(nb), encoding="utf-8")
    found, counts = {}, {}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-background-networking", "--disable-gpu"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        for name, html in pages.items():
            counts[name], bad = handout_problems(page, html)
            found.update({f"{name} {key}": value for key, value in bad.items()})
        browser.close()
    print("figures per handout:", counts)
    # every dashboard's first view drawn (a teaching notebook may have no figure: 10-12 print tables)
    assert all(n >= 1 for name, n in counts.items() if not name[:2].isdigit()), counts
    assert found == {}, "\n".join(f"{k}: {v[:6]}" for k, v in found.items())
