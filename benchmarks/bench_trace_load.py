"""Trace analysis speed and memory against HTA and a bare orjson parse, as whole processes.

For each trace (the largest real trace at hand, and synthetic traces this script
writes: 35 MB and >= 200 MB of JSON by default) it runs, each in a fresh
process, measuring wall time and peak RSS (``os.wait4`` rusage of that child):

  workbench  load_trace + analyze (every analysis) + flame tree + prune + busy-over-time
  hta        HTA 0.5.0 ``TraceAnalysis(trace_dir=...)`` merely loading the file
  orjson     read (gunzip) + ``orjson.loads`` of the file

and prints them side by side with ratios. Goals (issue 3): workbench >= 3x faster
than HTA, within 2x of the bare parse, peak memory <= 0.5x HTA's.

    python benchmarks/bench_trace_load.py [--json out.json] [--synthetic-mb 35 200] [--smoke]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
if str(ROOT) not in sys.path:  # run as a plain script from a checkout
    sys.path.insert(0, str(ROOT))

WORKBENCH = """
import sys
from workbench.trace import load_trace
from workbench.analysis import flame, gpu_timeline
from workbench.analysis.trace_report import analyze
trace = load_trace(sys.argv[1])
report = analyze(trace)
tree = flame.prune(flame.flame_tree(trace.events), min_share=0.01)
bins = gpu_timeline.busy_over_time(trace.events)
print(report["kernels"]["count"], len(tree), len(bins))
"""
# The child reports its own peak RSS: VmHWM belongs to its address space, whereas
# ru_maxrss of a forked child also counts the parent's memory at fork time.
FOOTER = """
import sys as _s
_s.stderr.write("\\nVMHWM_KB " + next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")) + "\\n")
"""
HTA = """
import sys, logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
print(len(analysis.t.get_trace(0)))
"""
ORJSON = """
import sys, gzip, orjson
data = open(sys.argv[1], "rb").read()
if data[:2] == b"\\x1f\\x8b":
    data = gzip.decompress(data)
print(len(orjson.loads(data)["traceEvents"]))
"""


def run_child(code: str, arg: str, timeout_s: float) -> dict:
    """Wall seconds and peak RSS (MB) of ``python -c code arg`` in a fresh process,
    reaped with ``os.wait4`` so the rusage is that child's own."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", code + FOOTER, arg], stdout=out, stderr=err, env=env)
        deadline = start + timeout_s
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                return {"ok": False, "wall_s": None, "peak_mb": None, "error": f"timed out after {timeout_s:.0f} s"}
            time.sleep(0.005)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace")
        ok = proc.returncode == 0
        hwm = [line.split()[1] for line in text.splitlines() if line.startswith("VMHWM_KB ")]
        peak_kb = int(hwm[-1]) if hwm else usage.ru_maxrss
        return {"ok": ok, "wall_s": wall, "peak_mb": peak_kb / 1024, "error": None if ok else text[-800:]}


def hta_dir(trace: Path, workdir: Path) -> Path:
    """HTA reads a folder of rank files: link the trace in under a rank-like name."""
    folder = workdir / f"hta_{trace.name.split('.')[0]}"
    folder.mkdir(exist_ok=True)
    suffix = ".json.gz" if trace.name.endswith(".gz") else ".json"
    link = folder / f"rank-0{suffix}"
    if not link.exists():
        try:
            link.symlink_to(trace.resolve())
        except OSError:
            shutil.copy2(trace, link)
    return folder


def bench_one(label: str, trace: Path, workdir: Path, timeout_s: float) -> dict:
    row = {"trace": label, "path": str(trace), "file_mb": trace.stat().st_size / 1e6}
    row["workbench"] = run_child(WORKBENCH, str(trace), timeout_s)
    row["hta"] = run_child(HTA, str(hta_dir(trace, workdir)), timeout_s)
    row["orjson"] = run_child(ORJSON, str(trace), timeout_s)
    # a tool that failed has no figures to compare (its time to the crash is not a load time)
    wb, hta, oj = (r if r["ok"] else {} for r in (row["workbench"], row["hta"], row["orjson"]))
    row["speedup_vs_hta"] = _ratio(hta.get("wall_s"), wb.get("wall_s"))
    row["time_vs_orjson"] = _ratio(wb.get("wall_s"), oj.get("wall_s"))
    row["memory_vs_hta"] = _ratio(wb.get("peak_mb"), hta.get("peak_mb"))
    row["memory_vs_orjson"] = _ratio(wb.get("peak_mb"), oj.get("peak_mb"))
    row["goals_met"] = {"3x_faster_than_hta": _at_least(row["speedup_vs_hta"], 3.0),
                        "within_2x_of_orjson": _at_most(row["time_vs_orjson"], 2.0),
                        "half_hta_memory": _at_most(row["memory_vs_hta"], 0.5)}
    return row


def _ratio(a, b):
    return a / b if a and b else None


def _at_least(x, bound):
    return None if x is None else x >= bound


def _at_most(x, bound):
    return None if x is None else x <= bound


def print_table(rows: list[dict]) -> None:
    head = (f"{'trace':<32} {'file MB':>7} | {'workbench s':>11} {'MB':>7} | {'HTA s':>8} {'MB':>7} | "
            f"{'orjson s':>8} {'MB':>7} | {'HTA/wb':>6} {'wb/orj':>6} {'mem wb/HTA':>10}")
    print(head)
    print("-" * len(head))
    for r in rows:
        cells = [(_fmt(r[k].get("wall_s"), 11 if k == "workbench" else 8) + " " + _fmt(r[k].get("peak_mb"), 7, 0))
                 if r[k]["ok"] else f"{'failed':>{20 if k == 'workbench' else 16}}" for k in ("workbench", "hta", "orjson")]
        print(f"{r['trace']:<32} {r['file_mb']:>7.1f} | " + " | ".join(cells) +
              f" | {_fmt(r['speedup_vs_hta'], 6)} {_fmt(r['time_vs_orjson'], 6)} {_fmt(r['memory_vs_hta'], 10)}")
        for k in ("workbench", "hta", "orjson"):
            if not r[k]["ok"]:
                print(f"    {k} failed: {r[k]['error']}")


def _fmt(x, width, digits=2):
    return f"{'-':>{width}}" if x is None else f"{x:>{width}.{digits}f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--synthetic-mb", type=float, nargs="*", default=[35, 200],
                        help="sizes of the synthetic traces to write and time (MB of JSON)")
    parser.add_argument("--trace", type=Path, action="append", help="real trace(s) to time (default: largest in ../shared/traces)")
    parser.add_argument("--workdir", type=Path, help="where synthetic traces go (default: a temp folder, removed)")
    parser.add_argument("--timeout", type=float, default=900, help="per-process limit in seconds")
    parser.add_argument("--smoke", action="store_true", help="tiny synthetic trace only (for tests)")
    args = parser.parse_args(argv)
    from workbench.trace.synthetic import write_synthetic_trace

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="wb_bench_trace_"))
    workdir.mkdir(parents=True, exist_ok=True)
    traces = [] if args.smoke else (args.trace or _largest_real())
    rows = [bench_one(p.name, p, workdir, args.timeout) for p in traces]
    for mb in ([0.2] if args.smoke else args.synthetic_mb):
        path = workdir / f"synthetic_{mb:g}mb.json"
        if not path.exists():
            write_synthetic_trace(path, int(mb * 1e6))
        rows.append(bench_one(f"synthetic {mb:g} MB", path, workdir, args.timeout))
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps({"python": sys.version.split()[0], "cpus": os.cpu_count(), "rows": rows}, indent=2))
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _largest_real() -> list[Path]:
    found = sorted(SHARED_TRACES.glob("*.json*"), key=lambda p: p.stat().st_size) if SHARED_TRACES.is_dir() else []
    return found[-1:]


if __name__ == "__main__":
    sys.exit(main())
