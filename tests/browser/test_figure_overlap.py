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
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
RUNS = REPO / "data" / "runs"
FIGURES = ("budget", "distribution", "flame", "batching")
# Text boxes per figure div: label groups that must not overlap each other (tick labels: within their own axis).
BOXES_JS = r"""
(id) => {
  const div = document.getElementById(id);
  const frame = div.getBoundingClientRect();
  const box = (el, group) => { const r = el.getBoundingClientRect();
    return {group, text: el.textContent, x0: r.left, y0: r.top, x1: r.right, y1: r.bottom}; };
  const out = [];
  const labels = ['.gtitle', '.gtitle-subtitle', '.xtitle', '.ytitle', '.legendtext', '.annotation-text'];
  for (const sel of labels) div.querySelectorAll(sel).forEach(el => { if (el.textContent.trim()) out.push(box(el, 'label')); });
  div.querySelectorAll('.xaxislayer-above, .yaxislayer-above').forEach((layer, i) =>
    layer.querySelectorAll('text').forEach(el => { if (el.textContent.trim()) out.push(box(el, 'ticks' + i)); }));
  return {frame: {x0: frame.left, y0: frame.top, x1: frame.right, y1: frame.bottom}, boxes: out};
}
"""


def overlaps(boxes: list[dict]) -> list[tuple[str, str]]:
    """Pairs of texts whose boxes intersect (by more than 1 px each way): labels with labels, ticks of one axis."""
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if a["group"] != b["group"] and "ticks" in a["group"] + b["group"]:
                continue  # a tick label against a title: plotly's automargin keeps them apart; not judged here
            if (
                min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > 1
                and min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > 1
            ):
                found.append((a["text"], b["text"]))
    return found


def clipped(frame: dict, boxes: list[dict]) -> list[str]:
    return [
        b["text"]
        for b in boxes
        if b["x0"] < frame["x0"] - 1
        or b["x1"] > frame["x1"] + 1
        or b["y0"] < frame["y0"] - 1
        or b["y1"] > frame["y1"] + 1
    ]


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    for name in ("text-cpu-bs1-fp32", "text-cpu-bs8-fp32", "text-cuda-bs1-fp32"):
        if not (RUNS / name / "run.json").is_file():
            pytest.skip(f"data/runs/{name} not recorded")
        shutil.copytree(RUNS / name, runs / name)
    out = tmp_path_factory.mktemp("static")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "export-dashboard",
            "--out",
            str(out),
            "--runs",
            str(runs),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
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
                got = page.evaluate(BOXES_JS, fig)
                bad = overlaps(got["boxes"]) + [
                    ("clipped", t, got["frame"], [b for b in got["boxes"] if b["text"] == t])
                    for t in clipped(got["frame"], got["boxes"])
                ]
                if bad:
                    problems[f"{config} {fig}"] = bad
        browser.close()
    print(f"static page, {machine}:", {k: round(v, 2) for k, v in timings.items()})
    for key, bad in problems.items():
        print(key, bad)
    assert problems == {}, problems
