"""One server for a room: N concurrent pages of the latency explorer against ``make room``'s server.

    python benchmarks/bench_room.py [--pages 30] [--pool N|DASHBOARD=N ...] [--refill-delay-s S]
                                    [--side server|browser|both]
                                    [--notebook dashboards/latency_explorer.ipynb] [--md PATH] [--json PATH]

Starts ``python -m workbench_room notebooks --room`` (2 preheated kernels per
dashboard, at most 40 kernels, live profiling queued) on a free port, opens
``--pages`` pages at once in one headless Chromium (Debian's, every outside
request aborted; one browser context per page, as each student has their own
browser and connection pool), and reads in each page (an init script, page clock) when its
first figure and all three figures had data. Then every page moves the
batch-size slider at the same moment and records when the budget figure changed.
Kernel count and the resident memory of the server and all its kernels (psutil)
are sampled every second; after the pages close, the time until every page's
kernel is gone. Figures are quoted, not asserted; the goal (issue 14) is no
failure, first figure p95 under 15 s, memory bounded.

The server's side apart from the browsers' (issue 30; ``--side server`` or ``both``,
which runs it first): in a room each browser runs on its own laptop, so the
server's part is measured without one. ``--pages`` clients at once, each a thread
speaking plain HTTP and the kernel websocket as a page does: the page's HTML
complete (Voila has run the notebook), kernel ready (its ``kernel_info_reply`` over
the page's websocket), widget state sent (the ``update_states`` reply to the
``request_states`` the widget manager sends on ``jupyter.widget.control``: every
widget model's state), each in seconds from the request. Then each client shuts its
kernel down as a closing page does. Goal: server-side p95 (widget state sent) under
5 s for 30 pages with a pool sized to the class (``--pool latency_explorer=30``: that dashboard's
pool, not every dashboard's), no failure, memory bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))
sys.path.insert(0, str(REPO))

from room_server import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    cpu_busy_pct,
    kernel_id_of,
    kernel_processes,
    room_server,
    tree_rss_bytes,
    wait_for_pools,
    wait_until_quiet,
)

from workbench_room.__main__ import ROOM_DEFAULTS, pool_spec  # noqa: E402

# In each page: when did the first plot, and all `want` plots, have data (ms since navigation start)?
WATCH = """(() => {
  const want = %d;
  const t = setInterval(() => {
    const plots = Array.from(document.querySelectorAll('.js-plotly-plot')).filter(el => el.data && el.data.length);
    if (plots.length >= 1 && window.__firstFigureMs === undefined) window.__firstFigureMs = performance.now();
    if (plots.length >= want && window.__allFiguresMs === undefined) { window.__allFiguresMs = performance.now(); clearInterval(t); }
    if (document.body && document.body.innerText.includes('There was an error when executing cell')) {
      window.__failed = 'a cell raised'; clearInterval(t); }
    if (document.body && document.body.innerText.includes("The server waited")) {
      window.__failed = 'the server gave up waiting for the outputs'; clearInterval(t); }
  }, 100);
})();"""
# first figure, all figures, failure, when the page's HTML had arrived (Voila streams it while the server runs
# the notebook, so this is the server's part), widget views built: ms since navigation start
PAGE_STATE = """() => { const nav = performance.getEntriesByType('navigation')[0];
  return [window.__firstFigureMs, window.__allFiguresMs, window.__failed || null,
          nav && nav.responseEnd > 0 ? nav.responseEnd : null, document.querySelectorAll('.jupyter-widgets').length]; }"""
BUDGET = (
    "(() => { const el = document.querySelectorAll('.js-plotly-plot')[0]; "
    "return JSON.stringify([el.layout.title && el.layout.title.text, el.data.map(t => Array.from(t.y || []))]); })()"
)


class Sampler(threading.Thread):
    """Kernel count and tree RSS of the server, every second."""

    def __init__(self, proc):
        super().__init__(daemon=True)
        self.proc, self.stop, self.samples = proc, threading.Event(), []

    def run(self):
        while not self.stop.is_set():
            self.samples.append(
                (time.monotonic(), len(kernel_processes(self.proc)), tree_rss_bytes(self.proc))
            )
            self.stop.wait(1.0)


WIDGET_CONTROL_VERSION = "1.0.0"  # ipywidgets 8's control comm refuses another (or none)


def _ws_message(frame) -> dict | None:
    """A kernel websocket message: JSON text, or jupyter's binary framing (count, offsets, JSON, buffers)."""
    if isinstance(frame, str):
        return json.loads(frame)
    if len(frame) < 8:
        return None
    n = int.from_bytes(frame[:4], "little")
    offsets = [int.from_bytes(frame[4 + 4 * i : 8 + 4 * i], "little") for i in range(n)]
    end = offsets[1] if n > 1 else len(frame)
    return json.loads(frame[offsets[0] : end])


def _request(msg_type: str, content: dict, session: str, metadata: dict | None = None) -> str:
    import uuid

    header = {
        "msg_id": uuid.uuid4().hex,
        "msg_type": msg_type,
        "session": session,
        "username": "",
        "version": "5.3",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return json.dumps(
        {
            "header": header,
            "parent_header": {},
            "metadata": metadata or {},
            "content": content,
            "channel": "shell",
            "buffers": [],
        }
    )


def server_side_page(url: str, notebook: str, timeout_s: float) -> dict:
    """One page's server side, no browser: seconds from the request to the page's HTML complete, its kernel
    ready, every widget's state sent; then its kernel shut down as a closing page does. ``failed``: why not."""
    import re
    import uuid

    import requests
    import websocket

    out = {
        "html_s": None,
        "kernel_ready_s": None,
        "widget_state_s": None,
        "widget_state_bytes": None,
        "widgets": None,
        "kernel": None,
        "failed": None,
    }
    http = requests.Session()
    started = time.monotonic()
    try:
        for _ in range(
            int(timeout_s // 2)
        ):  # 503 + Retry-After: this client holds too many unconnected pages
            reply = http.get(f"{url}voila/render/{notebook}", timeout=timeout_s)
            if reply.status_code != 503:
                break
            time.sleep(float(reply.headers.get("Retry-After", 2)))
        out["html_s"] = time.monotonic() - started
        if reply.status_code != 200:
            out["failed"] = f"HTTP {reply.status_code}"
            return out
        if "There was an error when executing cell" in reply.text:
            out["failed"] = "a cell raised"
        found = re.search(r'"kernelId":\s*"([0-9a-f-]{36})"', reply.text)
        if not found:
            out["failed"] = "no kernel id in the page"
            return out
        kernel = out["kernel"] = found.group(1)
        session = uuid.uuid4().hex
        ws = websocket.create_connection(
            f"{url.replace('http', 'ws', 1)}api/kernels/{kernel}/channels?session_id={session}",
            timeout=timeout_s,
            cookie="; ".join(f"{k}={v}" for k, v in http.cookies.items()),
        )
        try:
            ws.send(_request("kernel_info_request", {}, session))
            comm = uuid.uuid4().hex
            asked = False
            while out["widget_state_s"] is None and time.monotonic() - started < timeout_s:
                frame = ws.recv()
                msg = _ws_message(frame)
                kind = (msg or {}).get("header", {}).get("msg_type")
                if kind == "kernel_info_reply" and not asked:
                    out["kernel_ready_s"] = time.monotonic() - started
                    ws.send(
                        _request(
                            "comm_open",
                            {"comm_id": comm, "target_name": "jupyter.widget.control", "data": {}},
                            session,
                            {"version": WIDGET_CONTROL_VERSION},
                        )
                    )
                    ws.send(
                        _request(
                            "comm_msg",
                            {"comm_id": comm, "data": {"method": "request_states"}},
                            session,
                        )
                    )
                    asked = True
                elif kind == "comm_msg" and msg["content"].get("comm_id") == comm:
                    data = msg["content"].get("data") or {}
                    if data.get("method") == "update_states":
                        out["widget_state_s"] = time.monotonic() - started
                        out["widget_state_bytes"] = len(frame)
                        out["widgets"] = len(data.get("states") or {})
            if out["widget_state_s"] is None:
                out["failed"] = out["failed"] or f"no widget state within {timeout_s:.0f} s"
        finally:
            ws.close()
        xsrf = http.cookies.get("_xsrf")
        http.delete(
            f"{url}api/kernels/{kernel}", headers={"X-XSRFToken": xsrf} if xsrf else {}, timeout=30
        )
    except Exception as exc:  # noqa: BLE001 - one line per page: what went wrong
        out["failed"] = out["failed"] or f"{type(exc).__name__}: {exc}"[:200]
    return out


def server_side(url: str, notebook: str, pages: int, timeout_s: float) -> list[dict]:
    """``pages`` clients at once (threads): :func:`server_side_page` each."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=pages) as pool:
        return list(pool.map(lambda _: server_side_page(url, notebook, timeout_s), range(pages)))


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def student_context(browser, port: int, want: int, blocked: list):
    """One browser context per page, as each student has their own browser: Chromium allows 6
    connections per host and profile, and 30 streaming Voila pages in one profile starve each other."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    # only outside requests are routed (and aborted): a routed request waits until this process is inside
    # a Playwright call, so routing the page's own ~60 requests added seconds to its first figure
    outside = rf"^(?!http://127\.0\.0\.1:{port}/|ws://127\.0\.0\.1:{port}/|data:|blob:)"
    context.route(re.compile(outside), lambda r: (blocked.append(r.request.url), r.abort()))
    context.add_init_script(WATCH % want)
    return context


def open_pages(
    contexts: list, url: str, notebook: str, timeout_s: float
) -> tuple[list, list[dict]]:
    pages = [context.new_page() for context in contexts]
    n = len(pages)
    for page in pages:
        page.goto(f"{url}voila/render/{notebook}", wait_until="commit", timeout=timeout_s * 1000)
    deadline = time.monotonic() + timeout_s
    results = [{} for _ in pages]
    pending = set(range(n))
    while pending and time.monotonic() < deadline:
        for i in sorted(pending):
            state = pages[i].evaluate(PAGE_STATE)
            if state[2] or state[1] is not None:
                results[i] = {
                    "first_figure_s": state[0] / 1000 if state[0] else None,
                    "all_figures_s": state[1] / 1000 if state[1] else None,
                    "failed": state[2],
                    "html_s": state[3] / 1000 if state[3] else None,
                }
                pending.discard(i)
        pages[0].wait_for_timeout(500)  # Playwright keeps serving the pages' events while it waits
    for i in pending:
        state = pages[i].evaluate(PAGE_STATE)
        results[i] = {
            "first_figure_s": None,
            "all_figures_s": None,
            "failed": f"no figures within {timeout_s:.0f} s",
            "html_s": state[3] / 1000 if state[3] else None,
            "widget_views": state[4],
        }
    return pages, results


def move_sliders(pages: list, ok: list[bool], timeout_s: float) -> list[float | None]:
    """Every page that rendered presses ArrowRight on the batch-size slider; seconds until its budget changed."""
    for page, good in zip(pages, ok):
        if good:
            page.evaluate(
                f"() => {{ window.__before = {BUDGET}; window.__moved = performance.now(); "
                f"const t = setInterval(() => {{ if ({BUDGET} !== window.__before) "
                f"{{ window.__sliderMs = performance.now() - window.__moved; clearInterval(t); }} }}, 100); }}"
            )
            handle = page.locator(".widget-slider .noUi-handle").first
            handle.focus()
            handle.press("ArrowRight")
    deadline = time.monotonic() + timeout_s
    out: list[float | None] = [None] * len(pages)
    while time.monotonic() < deadline and any(g and o is None for g, o in zip(ok, out)):
        for i, page in enumerate(pages):
            if ok[i] and out[i] is None:
                ms = page.evaluate("() => window.__sliderMs")
                out[i] = ms / 1000 if ms is not None else None
        pages[0].wait_for_timeout(500)
    return out


def pool_sizes(specs: list[str] | None) -> dict[str, int]:
    """``{dashboard stem: preheated kernels}`` that the room's ``--pool`` specs give (parsed as the room
    parses them; its default for the rest)."""
    parsed = [pool_spec(s) for s in specs or ()]
    plain = [n for name, n in parsed if name is None]
    stems = [p.stem for p in (REPO / "notebooks" / "dashboards").glob("*.ipynb")]
    sizes = dict.fromkeys(stems, plain[-1] if plain else ROOM_DEFAULTS["pool"])
    sizes.update((Path(name).stem, n) for name, n in parsed if name is not None)
    return sizes


def summary(st: dict) -> dict:
    """The figures from whatever phases finished (``st`` is filled as the run goes)."""
    loads, ok, sliders, samples = (
        st.get("loads", []),
        st.get("ok", []),
        st.get("sliders", []),
        st.get("samples", []),
    )
    first = [r["first_figure_s"] for r in loads if r["first_figure_s"] is not None]
    html = [r["html_s"] for r in loads if r.get("html_s") is not None]
    full = [r["all_figures_s"] for r in loads if r["all_figures_s"] is not None]
    moved = [x for x in sliders if x is not None]
    server = st.get("server_side")

    def spread(key):
        values = [r[key] for r in server or [] if r.get(key) is not None]
        return {"p50": pct(values, 0.5), "p95": pct(values, 0.95), "max": max(values, default=None)}

    return {
        "pages": st["pages"],
        "notebook": st["notebook"],
        "wall_s": round(time.monotonic() - st["started"], 1),
        "side": st.get("side", "browser"),
        "pool": st.get("pool"),
        "refill_delay_s": st.get("refill_delay_s"),
        "pool_quiet_s": st.get("pool_quiet_s"),
        "max_unconnected_per_client": st.get("per_client", 0),
        "max_kernels": st.get("max_kernels"),
        "server_side": None
        if server is None
        else {
            "pages": len(server),
            "failures": sum(1 for r in server if r["failed"]),
            "failure_reasons": sorted({r["failed"] for r in server if r["failed"]}),
            **{k: spread(k) for k in ("html_s", "kernel_ready_s", "widget_state_s")},
            "widget_state_bytes": spread("widget_state_bytes"),
            "widgets": spread("widgets"),
            "rss_peak_mb": st.get("server_rss_peak_mb"),
            "kernels_peak": st.get("server_kernels_peak"),
            "kernels_left_after_close": st.get("server_left"),
            "reclaimed_s": st.get("server_reclaim_s"),
        },
        "interrupted": st.get("interrupted"),
        "phase_reached": st.get("phase"),
        "pool_ready_s": st.get("pool_ready_s"),
        "failures": sum(not g for g in ok) + sum(1 for e in st.get("errors", []) if e),
        "failure_reasons": sorted({r["failed"] for r in loads if r["failed"]}),
        "first_figure_s": {
            "p50": pct(first, 0.5),
            "p95": pct(first, 0.95),
            "max": max(first, default=None),
        },
        "all_figures_s": {
            "p50": pct(full, 0.5),
            "p95": pct(full, 0.95),
            "max": max(full, default=None),
        },
        "html_s": {"p50": pct(html, 0.5), "p95": pct(html, 0.95), "max": max(html, default=None)},
        "pages_without_figures": [
            {"html_s": r.get("html_s"), "widget_views": r.get("widget_views")}
            for r in loads
            if r["first_figure_s"] is None
        ],
        "slider_update_s": {
            "p50": pct(moved, 0.5),
            "p95": pct(moved, 0.95),
            "max": max(moved, default=None),
            "missing": sum(1 for g, x in zip(ok, sliders) if g and x is None),
        },
        "kernels_peak": max((x[1] for x in samples), default=None),
        "kernels_left_after_close": st.get("left"),
        "reclaimed_s": st.get("reclaim_s"),
        "rss_peak_mb": round(max((x[2] for x in samples), default=0) / 2**20),
        "blocked_outside_requests": len(st.get("blocked", [])),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_before": st.get("load_before"),
            "cpu_busy_before_pct": st.get("cpu_busy_before_pct"),
            "load_avg_at_end": [round(x, 1) for x in os.getloadavg()]
            if hasattr(os, "getloadavg")
            else None,
        },
    }


def run(st: dict, timeout_s: float) -> None:
    """Fill ``st`` phase by phase: pages loaded, sliders moved, pages closed, kernels reclaimed."""
    from playwright.sync_api import sync_playwright

    latency = "latency_explorer" in st["notebook"]
    want = 3 if latency else 6
    pool = tuple(a for spec in st.get("pool") or () for a in ("--pool", spec))
    if st.get("refill_delay_s") is not None:
        pool += ("--refill-delay-s", str(st["refill_delay_s"]))
    # every client here has one address (127.0.0.1); in a room each student has their own, so the per-address
    # bounds (a client's share of the kernels; its pages loaded and not yet connected) are off, unless asked
    bound = ("--max-kernels-per-client", "0")
    bound += ("--max-unconnected-per-client", str(st.get("per_client", 0)))
    bound += () if st.get("max_kernels") is None else ("--max-kernels", str(st["max_kernels"]))
    with room_server(
        "notebooks", "--room", *pool, *bound, log_name="bench_room.log", timeout_s=180
    ) as (proc, port, url, log):
        sampler = Sampler(proc)
        st["samples"] = sampler.samples
        sampler.start()
        try:
            pools = sum(1 for n in pool_sizes(st.get("pool")).values() if n > 0)
            st["pool_ready_s"] = wait_for_pools(
                log, 300.0 + 20.0 * sum(pool_sizes(st.get("pool")).values()), pools
            )  # before students come
            if st.get("side") in ("server", "both"):
                st["pool_quiet_s"] = wait_until_quiet(proc, 600.0)  # the pooled notebooks have run
                st["phase"] = "server side"
                first = len(sampler.samples)
                st["server_side"] = server_side(url, st["notebook"], st["pages"], timeout_s)
                ids = {r["kernel"] for r in st["server_side"] if r["kernel"]}
                closed = time.monotonic()
                while time.monotonic() - closed < 120:
                    if not ({kernel_id_of(p) for p in kernel_processes(proc)} & ids):
                        st["server_reclaim_s"] = time.monotonic() - closed
                        break
                    time.sleep(1)
                st["server_left"] = len(kernel_processes(proc))
                during = sampler.samples[first:] or sampler.samples[-1:]
                st["server_rss_peak_mb"] = (
                    round(max(x[2] for x in during) / 2**20) if during else None
                )
                st["server_kernels_peak"] = max(x[1] for x in during) if during else None
                print(json.dumps(summary(st)["server_side"]), flush=True)
                if st["side"] == "server":
                    st["phase"] = "done"
                    return
                st["pool_ready_s_again"] = wait_for_pools(log, 300.0, pools)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                st["blocked"] = []
                contexts = [
                    student_context(browser, port, want, st["blocked"]) for _ in range(st["pages"])
                ]
                st["phase"] = "loading"
                pages, st["loads"] = open_pages(contexts, url, st["notebook"], timeout_s)
                st["ok"] = ok = [r["failed"] is None for r in st["loads"]]
                st["errors"] = [
                    p.locator(".workbench-error").count() if g else 0 for p, g in zip(pages, ok)
                ]
                print(
                    json.dumps(summary(st)), flush=True
                )  # the load figures, in case a later phase is cut
                st["phase"] = "sliders"
                st["sliders"] = move_sliders(pages, ok, min(timeout_s, 240.0)) if latency else []
                ids = set()
                for page in pages:
                    try:
                        ids.add(
                            page.evaluate(
                                "() => JSON.parse(document.getElementById('jupyter-config-data')"
                                ".textContent).kernelId"
                            )
                        )
                    except Exception:  # noqa: BLE001 - a failed page may have no config
                        pass
                st["phase"] = "closing"
                for page in pages:
                    page.close(
                        run_before_unload=True
                    )  # a student closing the tab: the page asks for shutdown
                closed = time.monotonic()
                while time.monotonic() - closed < 120:
                    if not ({kernel_id_of(p) for p in kernel_processes(proc)} & ids):
                        st["reclaim_s"] = time.monotonic() - closed
                        break
                    time.sleep(1)
                st["left"] = len(kernel_processes(proc))
                st["phase"] = "done"
                browser.close()
        finally:
            sampler.stop.set()
            sampler.join()


def machine_line(machine: dict) -> str:
    """Quiet or busy, from the CPUs' use in the 2 s before the run (at the end the load is the benchmark's own)."""
    busy, before = machine.get("cpu_busy_before_pct"), machine.get("load_avg_before")
    if busy is None:
        return "CPU use before the run not measured (no psutil): whether other work shared the machine is not known."
    state = (
        "**The machine was busy before the run**: other work shared the cores"
        if busy > 25
        else "The machine was quiet before the run"
    )
    load = (
        f"; load average {before[0]} before it, {machine['load_avg_at_end'][0]} at the end"
        if before
        else ""
    )
    return f"{state} (CPUs {busy} % busy in the 2 s before it{load})."


def server_markdown(r: dict) -> list[str]:
    """The server's side: its table, failures, kernels and memory while the clients ran, and the goal."""
    s = r["server_side"]

    def f(v, digits=2):
        return "n/a" if v is None else f"{v:.{digits}f}"

    def row(name, key, digits=2):
        return f"| {name} | {f(s[key]['p50'], digits)} | {f(s[key]['p95'], digits)} | {f(s[key]['max'], digits)} |"

    pool = ", ".join(f"{k} {n}" for k, n in pool_sizes(r.get("pool")).items())
    refill = r.get("refill_delay_s")
    pool += f"; refills {'the room default' if refill is None else f'{refill} s'} after a page takes one"
    met = (
        s["failures"] == 0
        and s["widget_state_s"]["p95"] is not None
        and s["widget_state_s"]["p95"] < 5
    )
    return [
        "## The server's side (no browser)",
        "",
        f"{s['pages']} clients at once, each speaking HTTP and the kernel websocket as a page does, no browser; "
        f"preheated kernels per dashboard: {pool}. The clients started once the pool was filled and the server "
        f"and its kernels were quiet (under 0.1 core over 2 s: the pooled notebooks had run; "
        f"{r.get('pool_quiet_s')} s after the pool was filled), as when the instructor starts the room before "
        "class. Seconds from the page request.",
        "",
        "| server side | p50 | p95 | max |",
        "|---|---|---|---|",
        row("page HTML complete (the notebook ran)", "html_s"),
        row("kernel ready (kernel_info_reply on the page's websocket)", "kernel_ready_s"),
        row("widget state sent (update_states: every widget model)", "widget_state_s"),
        f"| widget state message (kB) | {f(_kb(s['widget_state_bytes']['p50']), 1)} "
        f"| {f(_kb(s['widget_state_bytes']['p95']), 1)} | {f(_kb(s['widget_state_bytes']['max']), 1)} |",
        "",
        f"- failures: {s['failures']} {s['failure_reasons'] or ''}; widget models per page: p50 "
        f"{f(s['widgets']['p50'], 0)}",
        f"- kernels: peak {s['kernels_peak']} while the clients ran; left after they closed: "
        f"{s['kernels_left_after_close']}; every client's kernel gone {f(s['reclaimed_s'], 1)} s after close",
        f"- memory, server + kernels (RSS): peak {s['rss_peak_mb']} MB while the clients ran",
        f"- goal (issue 30): server-side p95 (widget state sent) under 5 s for 30 pages, pool sized to the class, "
        f"no failure, memory bounded: **{'met' if met else 'not met'}** at {s['pages']} pages",
        "",
    ]


def _kb(n):
    return None if n is None else n / 1024


def markdown(r: dict) -> str:
    def f(v):
        return "n/a" if v is None else f"{v:.1f}"

    head = ["# Room benchmark (`benchmarks/bench_room.py`)", ""]
    server = server_markdown(r) if r.get("server_side") else []
    if r.get("side") == "server":
        return "\n".join(
            [
                *head,
                machine_line(r["machine"]),
                "",
                *server,
                f"- run {'interrupted: ' + r['interrupted'] if r['interrupted'] else 'complete'}; "
                f"wall time {r['wall_s']} s",
                "",
            ]
        )
    browsers = (
        ["## The browsers' side (one headless Chromium, each page a browser context)", ""]
        if server
        else []
    )
    return "\n".join(
        [
            *head,
            *server,
            *browsers,
            f"{r['pages']} concurrent pages of `{r['notebook']}` against `python -m workbench_room notebooks --room` "
            f"(preheated kernels per dashboard: {', '.join(f'{k} {n}' for k, n in pool_sizes(r.get('pool')).items())}; "
            f"at most {r.get('max_kernels') or 40} kernels, "
            "culling 30 s / 10 s), one headless Chromium "
            f"on the same machine with one browser context per page (a student each). {r['machine']['cpus']} cores.",
            f"Pages were opened once Voila reported every pool filled ({r['pool_ready_s']} s after the server printed "
            "its URL: the pooled kernels had started, their notebooks may still have been executing); "
            "closing a page runs its unload handler, as closing a tab does.",
            machine_line(r["machine"]),
            "",
            "| measure | p50 | p95 | max |",
            "|---|---|---|---|",
            f"| first figure (s, from navigation) | {f(r['first_figure_s']['p50'])} | {f(r['first_figure_s']['p95'])} "
            f"| {f(r['first_figure_s']['max'])} |",
            f"| all figures (s) | {f(r['all_figures_s']['p50'])} | {f(r['all_figures_s']['p95'])} "
            f"| {f(r['all_figures_s']['max'])} |",
            f"| page HTML complete (s; the server ran the notebook) | {f(r['html_s']['p50'])} | {f(r['html_s']['p95'])} "
            f"| {f(r['html_s']['max'])} |",
            f"| slider update, all pages at once (s) | {f(r['slider_update_s']['p50'])} "
            f"| {f(r['slider_update_s']['p95'])} | {f(r['slider_update_s']['max'])} |",
            "",
            f"- failures: {r['failures']} {r['failure_reasons'] or ''}; slider updates missing: "
            f"{r['slider_update_s']['missing']}",
            f"- pages without a figure, (HTML complete s, widget views): "
            f"{[(p['html_s'] and round(p['html_s'], 1), p['widget_views']) for p in r['pages_without_figures']] or 'none'}",
            f"- kernels: peak {r['kernels_peak']}; left after the pages closed: {r['kernels_left_after_close']} "
            f"(the pool); every page's kernel gone {f(r['reclaimed_s'])} s after close",
            f"- memory, server + kernels (RSS): peak {r['rss_peak_mb']} MB",
            f"- outside requests (all aborted): {r['blocked_outside_requests']}; wall time {r['wall_s']} s",
            f"- run {'interrupted: ' + r['interrupted'] if r['interrupted'] else 'complete'}",
            "",
            "Goal (issue 14): no failure, first figure p95 under 15 s, memory bounded.",
            "",
        ]
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pages", type=int, default=30)
    p.add_argument(
        "--notebook", default="dashboards/latency_explorer.ipynb", help="relative to notebooks/"
    )
    p.add_argument("--timeout-s", type=float, default=400.0)
    p.add_argument(
        "--side",
        choices=("server", "browser", "both"),
        default="both",
        help="server: the server's side only, no browser; both: the server's side, then the browsers'",
    )
    p.add_argument(
        "--per-client",
        type=int,
        default=0,
        help="the room's --max-unconnected-per-client (default 0, no bound: all clients here share one "
        "address; --max-kernels-per-client is off too)",
    )
    p.add_argument(
        "--max-kernels",
        type=int,
        default=None,
        help="the room's --max-kernels (its default: 40; a pool of P per dashboard needs 3 P + pages)",
    )
    p.add_argument(
        "--pool",
        action="append",
        default=None,
        metavar="N|DASHBOARD=N",
        help="the room's --pool, repeatable (its default: 2 per dashboard); sized to the class: "
        "--pool latency_explorer=PAGES",
    )
    p.add_argument(
        "--refill-delay-s",
        type=float,
        default=None,
        help="the room's --refill-delay-s (its default with --room: 10)",
    )
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--md", type=Path, default=REPO / "benchmarks" / "results" / "room.md")
    args = p.parse_args()
    try:
        sizes = pool_sizes(args.pool)
    except argparse.ArgumentTypeError:
        sizes = {"?": -1}
    if args.pages < 1 or min(sizes.values()) < 0:
        print(
            f"--pages must be at least 1 and --pool N or DASHBOARD=N, N at least 0 (got {args.pages}, "
            f"{args.pool})",
            file=sys.stderr,
        )
        return 2
    if args.side != "server" and not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing (Debian package chromium)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server on the way out
    st = {
        "pages": args.pages,
        "notebook": args.notebook,
        "started": time.monotonic(),
        "side": args.side,
        "pool": args.pool,
        "refill_delay_s": args.refill_delay_s,
        "per_client": args.per_client,
        "max_kernels": args.max_kernels,
        "load_before": [round(x, 1) for x in os.getloadavg()]
        if hasattr(os, "getloadavg")
        else None,
        "cpu_busy_before_pct": cpu_busy_pct(2.0),
    }
    try:
        run(st, args.timeout_s)
    except (SystemExit, KeyboardInterrupt) as exc:
        st["interrupted"] = f"stopped by {type(exc).__name__} during {st.get('phase')}"
    result = summary(st)
    print(json.dumps(result, indent=2))
    args.md.write_text(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    server = result["server_side"]
    if server is not None:
        server_p95 = server["widget_state_s"]["p95"]
        server_ok = server["failures"] == 0 and server_p95 is not None and server_p95 < 5
        if args.side == "server":
            return 0 if server_ok else 1
    first_p95 = result["first_figure_s"]["p95"]
    browser_ok = result["failures"] == 0 and first_p95 is not None and first_p95 < 15
    return 0 if browser_ok and (server is None or server_ok) else 1


if __name__ == "__main__":
    raise SystemExit(main())
