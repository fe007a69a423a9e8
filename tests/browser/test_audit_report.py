"""The audit report opens offline in a real browser: every figure draws with outside requests blocked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import main_output

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
RUN = REPO / "data" / "runs" / "image-cuda-bs64-fp32-pageable"


def test_report_draws_every_figure_offline(tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("chromium not installed (apt-get install chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    out = tmp_path / "report.html"
    rc, _, err = main_output(["audit", str(RUN), "--sla-ms", "100", "--out", str(out)])
    assert rc == 0, err
    outside = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-background-networking", "--disable-gpu"],
        )
        page = browser.new_page()

        def route(r):
            if r.request.url.startswith("file://"):
                return r.continue_()
            outside.append(r.request.url)
            return r.abort()

        page.route("**/*", route)
        page.goto(out.as_uri())
        page.wait_for_function(
            "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 8", timeout=60_000
        )
        n_figures = page.evaluate("document.querySelectorAll('.js-plotly-plot').length")
        text = page.inner_text("body")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=False)
        browser.close()
    assert outside == []
    # budget, survival, tail, latency over run, flame, launches, transfers, slowest traced requests
    # against the median
    assert n_figures == 8
    assert "p99 284 ms misses the 100 ms SLA" in text
    for section in ("1. Baseline", "2. Bottleneck", "3. Evidence", "4. Actions"):
        assert section in text
    assert "transfer" in text and "pinned host buffers" in text
