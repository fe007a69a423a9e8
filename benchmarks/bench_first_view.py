"""What one room kernel pays for the latency explorer's recorded first view: RSS, CPU time, torch or not.

    python benchmarks/bench_first_view.py [--examples text tabular image] [--as-before] [--json PATH]

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


def measure(example: str, mode: str) -> dict:
    env = {"OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), example, mode], capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, **env})
    if proc.returncode != 0:
        raise SystemExit(f"{example} ({mode}) failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", nargs="+", default=list(EXAMPLES), choices=EXAMPLES)
    parser.add_argument("--as-before", action="store_true", help="also replay the path before the cache")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args(argv)
    modes = ["now", "before"] if args.as_before else ["now"]
    rows = [measure(example, mode) for example in args.examples for mode in modes]
    print(f"{'example':8} {'path':6} {'torch':5} {'imports MB':>10} {'first view MB':>13} {'CPU s':>6}  status")
    for r in rows:
        print(f"{r['example']:8} {r['mode']:6} {'yes' if r['torch'] else 'no':5} {r['imports_mb']:10.1f} "
              f"{r['first_view_mb']:13.1f} {r['cpu_s']:6.2f}  {r['status']}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    recorded = all("recorded run" in r["status"] for r in rows)
    return 0 if recorded and not any(r["torch"] for r in rows if r["mode"] == "now") else 1


if __name__ == "__main__":
    sys.exit(main())
