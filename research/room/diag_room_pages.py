"""Where do pages opened together stall? The diagnostic that found why the 8-page room test failed.

    python research/room/diag_room_pages.py [--pool 1] [--pages 8] [--wait-s 200] [--busy-cores N]
        [--frames] [--reload-stalled] [--restore-stalled]

Starts ``python -m workbench_room`` (culling 5 s / 2 s, as the test), opens
``--pages`` pages (latency and trace explorers alternately, one browser
context each) in Debian's headless Chromium, and waits. Then prints, per
page: when its first widget view appeared (or never), its widget views and
plots, the requests it still has in flight, and its console errors and
warnings (the federated-module version warnings every page logs are left out).
``--reload-stalled`` then reloads each stalled page, one at a time, as a student
would, and reports whether it builds its widgets within ``--wait-s``.
``--busy-cores N`` keeps N other processes spinning during the run (a busy
machine: the stall was seen when another process took a core).
Each page's HTML as served is summarised (its cell outputs and widget views):
that is what showed the cause, pages served without their widget output
because the server stopped waiting for it (nbclient's iopub_timeout, 4 s by
default; the room now waits 120 s: ``workbench_room.app.IOPUB_TIMEOUT_S``).
For a stalled page it also reads the page's widget manager (restored or not,
models, kernel connection). ``--frames`` prints each page's kernel websocket
messages; ``--restore-stalled`` asks a stalled page's widget manager to
restore again.
The server log is ``artifacts/diag_room_pages.log``. Not a test: it reports.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "browser"))

from room_server import room_server  # noqa: E402

NOISE = ("Unsatisfied version", "No satisfying version")
MANAGER_JS = """async () => { const app = window.jupyterapp, m = app && app.widgetManager;
    if (!m) return 'no widget manager yet';
    const k = m.kernel, soon = (p, yes) => Promise.race([p.then(() => yes), new Promise(r => setTimeout(() => r('not ' + yes), 200))]);
    const outputs = Array.from(document.querySelectorAll('.jp-OutputArea-output')).map(el => el.getAttribute('data-mime-type') || el.className);
    return {app: await soon(app.started, 'started'), outputScriptsLeft: document.querySelectorAll('script[type="application/vnd.voila.cell-output+json"]').length,
            outputs: outputs.slice(0, 6), text: document.body.innerText.slice(0, 400), restored: m._restoredStatus, restoreInProgress: m._kernelRestoreInProgress,
            models: Object.keys(m._models || {}).length, connection: k && k.connectionStatus, kernel: k && k.status,
            loadingWidget: document.body.innerText.split('Loading widget...').length - 1}; }"""
STATE_JS = """() => ({views: document.querySelectorAll('.jupyter-widgets').length,
    plots: Array.from(document.querySelectorAll('.js-plotly-plot')).filter(el => el.data && el.data.length).length})"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", default="1", help="preheated kernels per dashboard (0: none)")
    ap.add_argument("--pages", type=int, default=8)
    ap.add_argument("--wait-s", type=float, default=200.0)
    ap.add_argument(
        "--reload-stalled", action="store_true", help="then reload each stalled page, one at a time"
    )
    ap.add_argument(
        "--busy-cores",
        type=int,
        default=0,
        help="spinning processes to run alongside (a busy machine)",
    )
    ap.add_argument(
        "--restore-stalled",
        action="store_true",
        help="then call the stalled pages' widget manager restoreWidgets() again and report",
    )
    ap.add_argument(
        "--frames",
        action="store_true",
        help="also print each page's kernel websocket messages (channel, type, comm method), both ways",
    )
    args = ap.parse_args()
    names = [("latency_explorer.ipynb", "trace_explorer.ipynb")[i % 2] for i in range(args.pages)]
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy_cores)
    ]
    try:
        return run(args, names)
    finally:
        for hog in hogs:
            hog.kill()


def run(args, names) -> int:
    from playwright.sync_api import sync_playwright

    with room_server(
        "--cull-idle-s",
        "5",
        "--cull-interval-s",
        "2",
        "--pool",
        args.pool,
        log_name="diag_room_pages.log",
    ) as (_proc, port, url, log):
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=["--no-sandbox", "--disable-background-networking", "--disable-gpu"],
            )
            pages = [
                browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
                for _ in names
            ]
            notes = [[] for _ in pages]
            pending = [{} for _ in pages]
            frames = [[] for _ in pages]
            html = [[] for _ in pages]
            for i, page in enumerate(pages):
                page.on(
                    "console",
                    lambda m, i=i: (
                        m.type in ("error", "warning")
                        and not m.text.startswith(NOISE)
                        and notes[i].append(f"{m.type}: {m.text[:160]}")
                    ),
                )
                page.on("pageerror", lambda e, i=i: notes[i].append(f"page error: {str(e)[:200]}"))
                page.on("request", lambda r, i=i: pending[i].setdefault(r.url, time.monotonic()))
                page.on(
                    "requestfinished",
                    lambda r, i=i: (
                        pending[i].pop(r.url, None),
                        "/voila/render/" in r.url and html[i].append(html_summary(r)),
                    ),
                )
                page.on("requestfailed", lambda r, i=i: pending[i].pop(r.url, None))
                if args.frames:
                    page.on(
                        "websocket", lambda ws, i=i: watch_frames(ws, frames[i], time.monotonic)
                    )
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
                seen = (
                    f"{first_view[i]:.1f} s"
                    if i in first_view
                    else f"never (waited {args.wait_s:.0f} s)"
                )
                inflight = [u.split(str(port), 1)[-1][:80] for u in pending[i]]
                print(
                    f"page {i} {name}: first widget view {seen}; {json.dumps(page.evaluate(STATE_JS))}; "
                    f"requests in flight: {inflight}"
                )
                print(f"    page HTML: {html[i]}")
                if i not in first_view:
                    print(f"    widget manager: {json.dumps(page.evaluate(MANAGER_JS))}")
                for note in notes[i]:
                    print(f"    {note}")
                for t, line in frames[i]:
                    print(f"    {t - started:7.2f} s {line}")
            stalled = [i for i in range(len(pages)) if i not in first_view]
            if args.restore_stalled:
                for i in stalled:
                    began = time.monotonic()
                    pages[i].evaluate("() => { window.jupyterapp.widgetManager.restoreWidgets(); }")
                    while (
                        time.monotonic() - began < args.wait_s
                        and pages[i].evaluate(STATE_JS)["views"] == 0
                    ):
                        time.sleep(1)
                    built = pages[i].evaluate(STATE_JS)["views"] > 0
                    print(
                        f"page {i} restored again: "
                        f"{'built its widgets in %.1f s' % (time.monotonic() - began) if built else 'still no widget view'}; "
                        f"{json.dumps(pages[i].evaluate(MANAGER_JS))}"
                    )
            if args.reload_stalled:
                for i in stalled:
                    began = time.monotonic()
                    pages[i].reload(wait_until="commit", timeout=120_000)
                    while (
                        time.monotonic() - began < args.wait_s
                        and pages[i].evaluate(STATE_JS)["views"] == 0
                    ):
                        time.sleep(1)
                    built = pages[i].evaluate(STATE_JS)["views"] > 0
                    print(
                        f"page {i} reloaded: {'built its widgets in %.1f s' % (time.monotonic() - began) if built else 'still no widget view'}"
                    )
            browser.close()
        print(f"{len(first_view)} of {len(pages)} pages built a widget view; server log: {log}")
    return 0 if len(first_view) == len(pages) else 1


def html_summary(request) -> str:
    """The page's HTML as served: its size, its cell outputs, whether it ends."""
    try:
        body = request.response().text()
    except Exception as exc:  # noqa: BLE001 - a diagnostic reports what it could not read
        return f"unreadable ({type(exc).__name__})"
    return (
        f"{len(body)} chars, {body.count('vnd.voila.cell-output+json')} cell outputs, "
        f"{body.count('widget-view+json')} widget views, ends with </html>: {body.rstrip().endswith('</html>')}"
    )


def watch_frames(ws, out: list, clock) -> None:
    """Record each kernel message a page's websocket carries, both ways, as one short line."""
    if "/channels" not in ws.url:
        return
    ws.on("framesent", lambda payload: out.append((clock(), "sent " + describe_frame(payload))))
    ws.on("framereceived", lambda payload: out.append((clock(), "recv " + describe_frame(payload))))
    ws.on("close", lambda _ws: out.append((clock(), "websocket closed")))


def describe_frame(payload) -> str:
    """channel, msg_type and, for comm messages, the target or method: from a JSON frame or a
    v1.kernel.websocket.jupyter.org binary frame (offsets, then channel, header, parent, metadata, content)."""
    try:
        if isinstance(payload, (bytes, bytearray)):
            n = int.from_bytes(payload[:8], "little")
            offs = [int.from_bytes(payload[8 * (k + 1) : 8 * (k + 2)], "little") for k in range(n)]
            parts = [payload[offs[k] : offs[k + 1]] for k in range(min(n - 1, 5))]
            channel = parts[0].decode()
            header, content = json.loads(parts[1]), json.loads(parts[4])
            size = len(payload)
        else:
            msg = json.loads(payload)
            channel, header, content, size = (
                msg.get("channel"),
                msg["header"],
                msg.get("content", {}),
                len(payload),
            )
        detail = (
            content.get("target_name")
            or (content.get("data") or {}).get("method")
            or content.get("execution_state")
            or ""
        )
        return (
            f"{channel} {header['msg_type']} {detail} {content.get('comm_id', '')[:8]} ({size} B)"
        )
    except Exception as exc:  # a frame this reader does not know
        return f"unreadable frame ({type(exc).__name__}: {exc})"


if __name__ == "__main__":
    sys.exit(main())
