"""What one room kernel pays for the latency explorer's recorded first view: RSS, CPU time, torch or not.

    python benchmarks/bench_first_view.py [--examples text tabular image] [--as-before] [--json PATH]
    python benchmarks/bench_first_view.py --breakdown [--examples text] [--json PATH]
    python benchmarks/bench_first_view.py --browser [--repeat 3] [--json PATH]
    python benchmarks/bench_first_view.py --browser --dashboard [--pool 0] [--repeat 3] [--json PATH]

``--breakdown`` ends with the goal of issue 30 for a recorded-configuration change
(``change_recorded_s``, text bs 1 -> 8: 0.3 s on a quiet machine) and how busy the
machine was. ``--browser`` measures the room's first figure for one visitor where
it goes, in headless Chromium (see :func:`browser`): navigation -> first drawn
figure (goal 3 s, preheated kernel), with the page's milestones on the way.
``--dashboard`` measures the same for ``make dashboard``: the launcher as the
Makefile runs it (``--pool 0``: as before it preheated, each page starting its
own kernel), with each kernel's memory once its notebook ran.

Each example runs in a fresh process, as a Voila kernel would: import the
widgets (RSS "imports"), build ``LatencyExplorer(example, runs=data/runs)``
and wait for its first view, a shipped recorded run (RSS "first view"), then
report whether torch was imported and the process's CPU seconds (user +
system, from its start). ``--as-before`` replays the path before the cached
model fingerprints in the same code: the profiler primed at construction
(which imports torch) and the model fingerprint computed by building the
pipeline; run both to compare in one go. RSS is psutil's; figures from a busy
machine vary, the torch import does not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("text", "tabular", "image")

CHILD = r"""
import json, os, resource, sys
sys.path.insert(0, sys.argv[1])
import psutil

def rss_mb():
    return psutil.Process(os.getpid()).memory_info().rss / 2**20

def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

from workbench.examples import data_dir
from workbench.widgets import LatencyExplorer
imports_mb, imports_cpu = rss_mb(), cpu_s()
if sys.argv[3] == "before":
    import workbench.examples.fingerprints as cache
    from workbench.device import prime_profiler
    cache.cached = lambda *a, **k: None  # every model fingerprint built, as before the cache
    prime_profiler()  # what the constructor did first, before
ex = LatencyExplorer(sys.argv[2], runs=data_dir() / "runs").wait(300)
print(json.dumps({"example": sys.argv[2], "mode": sys.argv[3], "imports_mb": round(imports_mb, 1),
                  "first_view_mb": round(rss_mb(), 1), "imports_cpu_s": round(imports_cpu, 2),
                  "cpu_s": round(cpu_s(), 2), "torch": "torch" in sys.modules, "status": ex.status.value}))
"""


BREAKDOWN = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
t0 = time.perf_counter()
import ipywidgets
from workbench.examples import data_dir
from workbench.widgets import LatencyExplorer
t_import = time.perf_counter()
before = set(ipywidgets.Widget.widgets) if hasattr(ipywidgets.Widget, "widgets") else None
ex = LatencyExplorer(sys.argv[2], runs=data_dir() / "runs", start=False)
t_built = time.perf_counter()
ex.refresh(); ex.wait(300)
t_first = time.perf_counter()
widgets = ipywidgets.Widget.widgets if hasattr(ipywidgets.Widget, "widgets") else {}
state_bytes = sum(len(json.dumps(w.get_state(), default=str)) for w in list(widgets.values()))
panes = {name: getattr(ex, name) for name in dir(ex) if name.endswith("_pane")}
figure_bytes = {name: sum(len(json.dumps(o.get("data", {}), default=str)) for o in pane.output.outputs)
                for name, pane in panes.items()}
t = time.perf_counter(); ex.set(batch_size=8).wait(300); change_s = time.perf_counter() - t
t = time.perf_counter(); ex.set(batch_size=1).wait(300); back_s = time.perf_counter() - t
print(json.dumps({"example": sys.argv[2], "import_s": round(t_import - t0, 3), "build_s": round(t_built - t_import, 3),
                  "first_view_s": round(t_first - t_built, 3), "widgets": len(widgets), "widget_state_kb":
                  round(state_bytes / 1024, 1), "figure_kb": {k: round(v / 1024, 1) for k, v in figure_bytes.items()},
                  "change_recorded_s": round(change_s, 3), "change_back_cached_s": round(back_s, 3),
                  "torch": "torch" in sys.modules, "status": ex.status.value}))
"""


def breakdown(example: str) -> dict:
    """Server side of a first view in one fresh process: where the time and the bytes go."""
    proc = subprocess.run(
        [sys.executable, "-c", BREAKDOWN, str(ROOT), example],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"},
    )
    if proc.returncode != 0:
        raise SystemExit(f"{example} (breakdown) failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


CHANGE_GOAL_S = 0.3  # issue 30: a recorded-configuration change, quiet machine
FIRST_FIGURE_GOAL_S = 3.0  # issue 30: the room's first figure for one visitor, preheated kernel


def machine_state(seconds: float = 2.0) -> dict:
    """How busy the machine was just before a measurement: CPUs busy (%) over ``seconds`` and the load average."""
    import os

    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    from room_server import cpu_busy_pct

    return {
        "cpus": os.cpu_count(),
        "cpu_busy_pct": cpu_busy_pct(seconds),
        "load_1min": round(os.getloadavg()[0], 2),
    }


def machine_words(state: dict) -> str:
    busy = state["cpu_busy_pct"] >= 25.0
    return (
        f"{'BUSY' if busy else 'quiet'} machine: CPUs {state['cpu_busy_pct']:g} % busy in the 2 s "
        f"before, load average {state['load_1min']:g} on {state['cpus']} cores"
    )


def goal_line(what: str, values: dict[str, float | None], goal_s: float, state: dict) -> str:
    """``goal: <what> <goal> s: text 0.18 s (met), ... [quiet machine: ...]``."""
    parts = [
        f"{name} {'-' if v is None else f'{v:.2f} s'} "
        f"({'not measured' if v is None else 'met' if v <= goal_s else 'NOT met'})"
        for name, v in values.items()
    ]
    return f"goal: {what} {goal_s:g} s: " + ", ".join(parts) + f" [{machine_words(state)}]"


def static_page(examples: list[str]) -> dict:
    """The static page's payload: plotly.js bytes and the figure JSON bytes per recorded configuration."""
    import time

    from plotly.offline import get_plotlyjs

    from workbench.examples import data_dir
    from workbench_room.static import recorded_entries, run_figures

    entries, _ = recorded_entries(data_dir() / "runs")
    entries = [e for e in entries if e.pipeline in examples]
    started = time.perf_counter()
    sizes = [len(json.dumps(run_figures(e), separators=(",", ":"))) for e in entries]
    return {
        "configurations": len(entries),
        "plotlyjs_kb": round(len(get_plotlyjs()) / 1024, 1),
        "figures_kb_total": round(sum(sizes) / 1024, 1),
        "figures_kb_max": round(max(sizes) / 1024, 1),
        "build_s": round(time.perf_counter() - started, 2),
    }


def measure(example: str, mode: str) -> dict:
    env = {"OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), example, mode],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, **env},
    )
    if proc.returncode != 0:
        raise SystemExit(f"{example} ({mode}) failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
]
NOTEBOOK = "dashboards/latency_explorer.ipynb"
# The Makefile's `make dashboard` line: $(PY) -m workbench_room notebooks/dashboards --host 127.0.0.1 --port $(PORT)
DASHBOARD_LAUNCHER = ("notebooks/dashboards", "--host", "127.0.0.1")
# In the page, from navigation (ms, page clock): widget views on the page, figures drawn, long tasks.
MARKS = r"""(() => {
  const wb = window.__wb = {widgets: null, first: null, all: null, drawn: 0, long: [], failed: null};
  try { new PerformanceObserver(l => l.getEntries().forEach(e => wb.long.push([e.startTime, e.duration])))
        .observe({type: 'longtask', buffered: true}); } catch (e) {}
  const t = setInterval(() => {
    if (!document.body) return;
    if (wb.widgets === null && document.querySelector('.jupyter-widgets')) wb.widgets = performance.now();
    const drawn = Array.from(document.querySelectorAll('.js-plotly-plot')).filter(el => el.data && el.data.length);
    if (drawn.length && wb.first === null) { wb.first = performance.now(); wb.drawn = drawn.length; }
    if (drawn.length >= %d) { wb.all = performance.now(); clearInterval(t); }
    if (document.body.innerText.includes('There was an error when executing cell')) { wb.failed = 'a cell raised'; clearInterval(t); }
  }, 10);
})();"""
PAGE = """() => { const wb = window.__wb, nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const scripts = res.filter(r => r.initiatorType === 'script' || r.name.includes('.js'));
  const kernel = res.find(r => /\\/api\\/kernels\\/[0-9a-f-]{36}/.test(r.name));
  const before = wb.long.filter(([s, d]) => s < (wb.first || Infinity));
  return {html: nav.responseEnd, load: nav.loadEventEnd, scripts_end: Math.max(0, ...scripts.map(r => r.responseEnd)),
          scripts: scripts.length, script_bytes: scripts.reduce((a, r) => a + (r.encodedBodySize || 0), 0),
          largest_script_bytes: Math.max(0, ...scripts.map(r => r.encodedBodySize || 0)),
          kernel: kernel ? kernel.responseEnd : null, widgets: wb.widgets, first: wb.first, all: wb.all,
          drawn: wb.drawn, failed: wb.failed, long_ms: before.reduce((a, [s, d]) => a + d, 0),
          longest_ms: Math.max(0, ...before.map(([s, d]) => d)),
          views: document.querySelectorAll('.jupyter-widgets').length}; }"""
BUDGET = (
    "(() => { const el = document.querySelector('.js-plotly-plot'); "
    "return JSON.stringify([el.layout.title && el.layout.title.text, "
    "(el._fullData || []).map(t => Array.from(t.y || []))]); })()"
)


def _one_page(
    chromium, url: str, port: int, want: int, timeout_s: float, notebook: str = NOTEBOOK
) -> dict:
    """One visitor: a fresh browser context, navigation -> first figure, then a recorded change in the page."""
    import re

    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    # only outside requests are routed (and aborted): the page's own ~60 requests never wait on this process
    local = rf"^(?!http://127\.0\.0\.1:{port}/|ws://127\.0\.0\.1:{port}/|data:|blob:)"
    context.route(re.compile(local), lambda route: route.abort())
    context.add_init_script(MARKS % want)
    page = context.new_page()
    try:
        page.goto(f"{url}voila/render/{notebook}", wait_until="commit", timeout=timeout_s * 1000)
        page.wait_for_function(
            "() => window.__wb && (window.__wb.all !== null || window.__wb.failed)",
            timeout=timeout_s * 1000,
        )
        raw = page.evaluate(PAGE)
        row = {
            k: (None if raw[k] is None else round(raw[k] / 1000, 2))
            for k in ("html", "load", "scripts_end", "kernel", "widgets", "first", "all")
        }
        row = {
            f"{k}_s" if k not in ("first", "all") else f"{k}_figure{'s' if k == 'all' else ''}_s": v
            for k, v in row.items()
        }
        row |= {
            "figures_at_first": raw["drawn"],
            "widget_views": raw["views"],
            "long_tasks_before_first_s": round(raw["long_ms"] / 1000, 2),
            "longest_task_s": round(raw["longest_ms"] / 1000, 2),
            "scripts": raw["scripts"],
            "script_kb": round(raw["script_bytes"] / 1024),
            "largest_script_kb": round(raw["largest_script_bytes"] / 1024),
            "failed": raw["failed"],
        }
        before = page.evaluate(f"() => {BUDGET}")
        handle = page.locator(".widget-slider .noUi-handle").first
        handle.focus()
        started = page.evaluate("() => performance.now()")
        handle.press("ArrowRight")  # batch size 1 -> 2, a recorded run
        page.wait_for_function(f"(b) => {BUDGET} !== b", arg=before, timeout=timeout_s * 1000)
        row["change_s"] = round((page.evaluate("() => performance.now()") - started) / 1000, 2)
        return row
    finally:
        context.close()


def kernels_mb(proc) -> list[dict]:
    """Each kernel of the server: resident and unique memory (MB, psutil), largest first."""
    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    from room_server import kernel_processes

    rows = []
    for p in kernel_processes(proc):
        info = p.memory_full_info()
        rows.append({"rss_mb": round(info.rss / 2**20), "uss_mb": round(info.uss / 2**20)})
    return sorted(rows, key=lambda r: -r["rss_mb"])


def browser(
    repeat: int, timeout_s: float = 120.0, dashboard: bool = False, pool: str | None = None
):
    """The room's first figure for one visitor, ``repeat`` visitors one after another, each on a preheated kernel.

    ``python -m workbench_room notebooks --room`` with a latency-explorer pool of ``repeat``
    kernels; the pages open once every pool is filled and the pooled notebooks have run
    (the server idle), in Debian's headless Chromium at 1280x800. Per page, seconds from
    navigation (page clock): HTML complete, load event, last script received, kernel
    connected, first widget view, first and all first-screen figures drawn; the main
    thread's long tasks before the first figure; then a recorded change in the page
    (batch size 1 -> 2: until the budget figure changed).

    ``dashboard``: ``make dashboard``'s launcher instead (``DASHBOARD_LAUNCHER``, plus ``--pool
    POOL`` when given), its own pool; each page opens once the server is idle again (the pool
    refilled after the page before: one person coming back), and the kernels' memory is read
    once the first pools' notebooks ran.
    """
    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    from playwright.sync_api import sync_playwright
    from room_server import room_server, wait_for_pools, wait_until_quiet

    want = 5  # budget, tail, distribution, latency over the run, request stages (the flame is on demand)
    if dashboard:
        args = DASHBOARD_LAUNCHER + (() if pool is None else ("--pool", pool))
        notebook, pools = Path(NOTEBOOK).name, 0 if pool == "0" else None
    else:
        args = ("notebooks", "--room", "--pool", f"latency_explorer={repeat}")
        args += ("--max-unconnected-per-client", "0")
        notebook, pools = NOTEBOOK, None
    with room_server(*args, log_name="bench_first_view.log", timeout_s=180) as (
        proc,
        port,
        url,
        log,
    ):
        if pools is None:
            pools = len(list((ROOT / "notebooks" / "dashboards").glob("*.ipynb")))
        pools_s = wait_for_pools(log, 300.0, pools) if pools else 0.0
        quiet_s = wait_until_quiet(proc, 600.0)
        kernels = kernels_mb(proc)
        pages = []
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                for i in range(repeat):
                    waited = wait_until_quiet(proc, 600.0) if dashboard and i else None
                    row = _one_page(chromium, url, port, want, timeout_s, notebook)
                    pages.append(row | ({} if waited is None else {"server_quiet_s": waited}))
            finally:
                chromium.close()
    return {
        "launcher": ["python", "-m", "workbench_room", *args],
        "pools_filled_s": pools_s,
        "server_quiet_s": quiet_s,
        "kernels_before_pages": kernels,
        "pages": pages,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", nargs="+", default=list(EXAMPLES), choices=EXAMPLES)
    parser.add_argument(
        "--as-before", action="store_true", help="also replay the path before the cache"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="where a first view's time and bytes go: imports, controls, the recorded view, widget "
        "count and state, figure JSON per pane, a recorded config change; and the static page",
    )
    parser.add_argument(
        "--browser",
        action="store_true",
        help="the room's first figure for one visitor in headless Chromium, with the page's milestones",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="--browser: pages opened one after another"
    )
    parser.add_argument(
        "--dashboard",
        action="store_true",
        help="--browser: `make dashboard`'s launcher and pool instead of the room's",
    )
    parser.add_argument(
        "--pool",
        default=None,
        metavar="N|DASHBOARD=N",
        help="--browser --dashboard: the launcher's --pool (0: no preheated kernel, as before)",
    )
    args = parser.parse_args(argv)
    if args.browser:
        if args.repeat < 1:
            parser.error(f"--repeat must be at least 1, got {args.repeat}")
        if not Path(CHROMIUM).exists():
            print(f"--browser needs {CHROMIUM} (Debian's chromium; `make browser` installs it)")
            return 2
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            print("--browser needs playwright (requirements.lock; `make test` installs it)")
            return 2
        if args.pool is not None and not args.dashboard:
            parser.error("--pool goes with --dashboard (the room's pool is --repeat kernels)")
        state = machine_state()
        result = browser(args.repeat, dashboard=args.dashboard, pool=args.pool) | {"machine": state}
        print(" ".join(result["launcher"]))
        kernels = result["kernels_before_pages"]
        print(
            f"{len(kernels)} kernels before the first page, RSS / USS MB each: "
            + (", ".join(f"{k['rss_mb']} / {k['uss_mb']}" for k in kernels) or "-")
        )
        for row in result["pages"]:
            print(json.dumps(row))
        firsts = {f"page {i + 1}": r.get("first_figure_s") for i, r in enumerate(result["pages"])}
        what = "make dashboard's" if args.dashboard else "room's"
        print(goal_line(f"{what} first figure for one visitor", firsts, FIRST_FIGURE_GOAL_S, state))
        if args.json:
            args.json.write_text(json.dumps(result, indent=1) + "\n")
        return 0 if all(v is not None for v in firsts.values()) else 1
    if args.breakdown:
        state = machine_state()
        rows = [breakdown(example) for example in args.examples]
        page = static_page(args.examples)
        for r in rows:
            print(json.dumps(r))
        print(json.dumps({"static_page": page}))
        changes = {r["example"]: r["change_recorded_s"] for r in rows}
        print(goal_line("a recorded-configuration change", changes, CHANGE_GOAL_S, state))
        if args.json:
            args.json.write_text(
                json.dumps({"explorer": rows, "static_page": page, "machine": state}, indent=1)
                + "\n"
            )
        return 0
    modes = ["now", "before"] if args.as_before else ["now"]
    rows = [measure(example, mode) for example in args.examples for mode in modes]
    print(
        f"{'example':8} {'path':6} {'torch':5} {'imports MB':>10} {'first view MB':>13} {'CPU s':>6}  status"
    )
    for r in rows:
        print(
            f"{r['example']:8} {r['mode']:6} {'yes' if r['torch'] else 'no':5} {r['imports_mb']:10.1f} "
            f"{r['first_view_mb']:13.1f} {r['cpu_s']:6.2f}  {r['status']}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    recorded = all("recorded run" in r["status"] for r in rows)
    return 0 if recorded and not any(r["torch"] for r in rows if r["mode"] == "now") else 1


if __name__ == "__main__":
    sys.exit(main())
