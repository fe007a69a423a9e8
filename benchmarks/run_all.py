"""Run every benchmark and keep its figures in benchmarks/results/ (``make bench``).

Each benchmark compares against its peer tool in the same run and prints ratios;
this script only runs them one after another so they do not compete for the
two cores.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
BENCHMARKS = ["bench_overhead", "bench_trace_load", "bench_simulator", "bench_figures", "bench_widget_memory"]


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    failed = []
    for name in BENCHMARKS:
        script = HERE / f"{name}.py"
        if not script.exists():
            print(f"== {name}: missing", flush=True)
            failed.append(name)
            continue
        print(f"== {name}", flush=True)
        code = subprocess.call([sys.executable, str(script), "--json", str(RESULTS / f"{name}.json")])
        if code:
            failed.append(name)
    print("failed or missed goals: " + (", ".join(failed) if failed else "none"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
