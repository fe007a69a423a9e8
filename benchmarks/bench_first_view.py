"""What one room kernel pays for the latency explorer's recorded first view: RSS, CPU time, torch or not.

    python benchmarks/bench_first_view.py [--examples text tabular image] [--as-before] [--json PATH]
    python benchmarks/bench_first_view.py --breakdown [--examples text] [--json PATH]

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


def static_page(examples: list[str]) -> dict:
    """The static page's payload: plotly.js bytes and the figure JSON bytes per recorded configuration."""
    import time

    from plotly.offline import get_plotlyjs

    from workbench.examples import data_dir
    from workbench.export.dashboard import recorded_entries, run_figures

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
    args = parser.parse_args(argv)
    if args.breakdown:
        rows = [breakdown(example) for example in args.examples]
        page = static_page(args.examples)
        for r in rows:
            print(json.dumps(r))
        print(json.dumps({"static_page": page}))
        if args.json:
            args.json.write_text(
                json.dumps({"explorer": rows, "static_page": page}, indent=1) + "\n"
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
