"""Where do pages opened together stall? A diagnostic for the quarantined 8-page room test.

    python benchmarks/diag_room_pages.py [--pool 1] [--pages 8] [--wait-s 200] [--reload-stalled] [--busy-cores N]

Starts ``python -m workbench.room`` (culling 5 s / 2 s, as the test), opens
``--pages`` pages (latency and trace explorers alternately, one browser
context each) in Debian's headless Chromium, and waits. Then prints, per
page: when its first widget view appeared (or never), its widget views and
plots, the requests it still has in flight, and its console errors and
warnings (the federated-module version warnings every page logs are left out).
``--reload-stalled`` then reloads each stalled page, one at a time, as a student
would, and reports whether it builds its widgets within ``--wait-s``.
``--busy-cores N`` keeps N other processes spinning during the run (a busy
machine: the stall was seen when another process took a core).
The server log is ``artifacts/diag_room_pages.log``. Not a test: it reports.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))

from room_server import room_server  # noqa: E402

NOISE = ("Unsatisfied version", "No satisfying version")
STATE_JS = """() => ({views: document.querySelectorAll('.jupyter-widgets').length,
    plots: Array.from(document.querySelectorAll('.js-plotly-plot')).filter(el => el.data && el.data.length).length})"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", default="1", help="preheated kernels per dashboard (0: none)")
    ap.add_argument("--pages", type=int, default=8)
    ap.add_argument("--wait-s", type=float, default=200.0)
    ap.add_argument("--reload-stalled", action="store_true", help="then reload each stalled page, one at a time")
    ap.add_argument("--busy-cores", type=int, default=0, help="spinning processes to run alongside (a busy machine)")
    args = ap.parse_args()
    names = [("latency_explorer.ipynb", "trace_explorer.ipynb")[i % 2] for i in range(args.pages)]
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy_cores)]
    try:
        return run(args, names)
    finally:
        for hog in hogs:
            hog.kill()


def run(args, names) -> int:
    from playwright.sync_api import sync_playwright

    with room_server("--cull-idle-s", "5", "--cull-interval-s", "2", "--pool", args.pool,
                     log_name="diag_room_pages.log") as (_proc, port, url, log):
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                         args=["--no-sandbox", "--disable-background-networking", "--disable-gpu"])
            pages = [browser.new_context(viewport={"width": 1280, "height": 900}).new_page() for _ in names]
            notes = [[] for _ in pages]
            pending = [{} for _ in pages]
            for i, page in enumerate(pages):
                page.on("console", lambda m, i=i: m.type in ("error", "warning") and not m.text.startswith(NOISE)
                        and notes[i].append(f"{m.type}: {m.text[:160]}"))
                page.on("pageerror", lambda e, i=i: notes[i].append(f"page error: {str(e)[:200]}"))
                page.on("request", lambda r, i=i: pending[i].setdefault(r.url, time.monotonic()))
                page.on("requestfinished", lambda r, i=i: pending[i].pop(r.url, None))
                page.on("requestfailed", lambda r, i=i: pending[i].pop(r.url, None))
            started = time.monotonic()
            for page, name in zip(pages, names):
                page.goto(f"{url}voila/render/{name}", wait_until="commit", timeout=120_000)
            first_view: dict[int, float] = {}
            while time.monotonic() - started < args.wait_s and len(first_view) < len(pages):
                for i, page in enumerate(pages):
                    if i not in first_view and page.evaluate(STATE_JS)["views"] > 0:
                        first_view[i] = time.monotonic() - started
                time.sleep(2)
            for i, (page, name) in enumerate(zip(pages, names)):
                seen = f"{first_view[i]:.1f} s" if i in first_view else f"never (waited {args.wait_s:.0f} s)"
                inflight = [u.split(str(port), 1)[-1][:80] for u in pending[i]]
                print(f"page {i} {name}: first widget view {seen}; {json.dumps(page.evaluate(STATE_JS))}; "
                      f"requests in flight: {inflight}")
                for note in notes[i]:
                    print(f"    {note}")
            stalled = [i for i in range(len(pages)) if i not in first_view]
            if args.reload_stalled:
                for i in stalled:
                    began = time.monotonic()
                    pages[i].reload(wait_until="commit", timeout=120_000)
                    while time.monotonic() - began < args.wait_s and pages[i].evaluate(STATE_JS)["views"] == 0:
                        time.sleep(1)
                    built = pages[i].evaluate(STATE_JS)["views"] > 0
                    print(f"page {i} reloaded: {'built its widgets in %.1f s' % (time.monotonic() - began) if built else 'still no widget view'}")
            browser.close()
        print(f"{len(first_view)} of {len(pages)} pages built a widget view; server log: {log}")
    return 0 if len(first_view) == len(pages) else 1


if __name__ == "__main__":
    sys.exit(main())
