"""The static dashboard (``export-dashboard``) in a real browser: offline, controls work with no kernel."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.cli import main_output

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
RUNS = REPO / "data" / "runs"


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    for name in (
        "text-cpu-bs1-fp32",
        "text-cpu-bs8-fp32",
        "text-cuda-bs1-fp32",
        "image-cuda-bs64-fp32",
        "image-cuda-bs64-fp32-pageable",
    ):
        shutil.copytree(RUNS / name, runs / name)
    (runs / "broken").mkdir()
    (runs / "broken" / "run.json").write_text("{not json")
    out = tmp_path_factory.mktemp("static")
    rc, _, err = main_output(["export-dashboard", "--out", str(out), "--runs", str(runs)])
    assert rc == 0, err
    return out / "index.html"


def test_controls_switch_recorded_runs_offline(page_file):
    if not CHROMIUM.exists():
        pytest.skip("chromium not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    assert page_file.stat().st_size < 15e6
    outside, errors = [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-background-networking", "--disable-gpu"],
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.route(
            "**/*",
            lambda r: (
                r.continue_()
                if r.request.url.startswith("file://")
                else (outside.append(r.request.url), r.abort())
            ),
        )
        page.goto(page_file.as_uri())
        page.wait_for_function("document.body.dataset.drawn !== undefined", timeout=30_000)
        first = page.evaluate("document.body.dataset.drawn")
        page.select_option("#pipeline", "text")
        page.select_option("#device", "cpu")
        page.select_option("#batch_size", "8")
        drawn = page.evaluate("document.body.dataset.drawn")
        plots = page.evaluate(
            "document.querySelectorAll('#batching .main-svg, #budget .main-svg').length"
        )
        page.select_option("#pipeline", "image")
        page.select_option("#device", "cuda")
        variants = page.evaluate(
            "[...document.getElementById('variant').options].map(o => o.value)"
        )
        page.select_option("#variant", "pin_memory=False")
        pageable = page.evaluate("document.getElementById('status').textContent")
        notes = page.inner_text("#notes")
        browser.close()
    assert outside == [] and errors == []
    assert first == "image|cuda|64|fp32|default"
    assert (
        drawn == "text|cpu|8|fp32|default" and plots >= 2
    )  # batching curves from the bs1 + bs8 runs
    assert variants == ["default", "pin_memory=False"]
    assert pageable.startswith("recorded run image-cuda-bs64-fp32-pageable")
    assert "skipped broken" in notes
