"""``analyze`` speed and memory against HTA and a bare orjson parse, as whole processes.

For each trace (every real trace in ``../shared/traces`` and synthetic traces this
script writes: 200 MB and 1 GB of JSON by default) it runs, each in a fresh
process, repeated and interleaved (wb, HTA, orjson, wb, HTA, ...) so a busy
machine slows all three alike:

  workbench  ``python -m workbench analyze TRACE --json`` (load + every analysis + JSON out), run as
             the user runs it (its entry point, through runpy) for the wall time and the peak;
             its memory growth comes from a second child doing the same work with every
             import done first (``workbench_memory``), so it compares with HTA's post-import growth
  hta        HTA 0.5.0 ``TraceAnalysis(trace_dir=...)`` merely loading the file
  orjson     read (gunzip) + ``orjson.loads`` of the file

Each child reports its wall time, its peak RSS (VmHWM) and its RSS right after
its imports (the post-import baseline), so memory compares what each tool needs
for the trace itself. The three ratios of issue 10 (goals):

  speedup_vs_hta      HTA wall / workbench wall             >= 3
  time_vs_orjson      workbench wall / orjson wall          <= 2
  memory_vs_hta       workbench (peak - baseline) / HTA's   <= 0.5

Wall times are the fastest of the repeats (the least disturbed). Paths in the
results are relative to the repository (synthetic traces: their file name).

    python benchmarks/bench_trace_load.py [--json out.json] [--synthetic-mb 200 1000] [--repeat 3] [--smoke]
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

_RSS = 'next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("{}"))'
BASELINE = f"_BASE_KB = {_RSS.format('VmRSS')}\n"
# The child reports its own peak: VmHWM belongs to its address space, whereas
# ru_maxrss of a forked child also counts the parent's memory at fork time.
FOOTER = f"""
sys.stderr.write("\\nVMHWM_KB %d BASE_KB %d\\n" % ({_RSS.format("VmHWM")}, _BASE_KB))
"""
# The command exactly as a user runs it (``python -m workbench analyze TRACE --json``: its entry point
# hides pyarrow and imports pandas while the trace is read), for wall time and whole-process peak.
WORKBENCH = (
    """
import runpy, sys
"""
    + BASELINE
    + """
sys.argv = ["workbench", "analyze", sys.argv[1], "--json"]
try:
    runpy.run_module("workbench", run_name="__main__")
except SystemExit as exc:
    rc = exc.code
"""
    + FOOTER
    + "sys.exit(rc)\n"
)
# The same work with every import done first, so that peak minus the post-import RSS is the memory the
# trace itself needs (what HTA's figure means): only this child's memory growth is used.
WORKBENCH_MEMORY = (
    """
import sys
from workbench.cli import main, prepare_process
argv = ["analyze", sys.argv[1], "--json"]
prepare_process(argv)
import workbench.analysis.trace_report, workbench.trace.load  # what analyze imports before reading a byte
"""
    + BASELINE
    + """
rc = main(argv)
"""
    + FOOTER
    + "sys.exit(rc)\n"
)
HTA = (
    """
import sys, logging
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
"""
    + BASELINE
    + """
analysis = TraceAnalysis(trace_dir=sys.argv[1])
print(sum(len(t) for t in analysis.t.traces.values()))  # the rank comes from the trace, not the file name
"""
    + FOOTER
)
ORJSON = (
    """
import sys, gzip, orjson
"""
    + BASELINE
    + """
data = open(sys.argv[1], "rb").read()
if data[:2] == b"\\x1f\\x8b":
    data = gzip.decompress(data)
print(len(orjson.loads(data)["traceEvents"]))
"""
    + FOOTER
)
TOOLS = {"workbench": WORKBENCH, "workbench_memory": WORKBENCH_MEMORY, "hta": HTA, "orjson": ORJSON}


def run_child(code: str, arg: str, timeout_s: float) -> dict:
    """Wall seconds, peak and post-import RSS (MB) of ``python -c code arg`` in a fresh process."""
    env = dict(
        os.environ,
        PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        OMP_NUM_THREADS="1",
    )
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", code, arg], stdout=subprocess.DEVNULL, stderr=err, env=env
        )
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return {
                "ok": False,
                "wall_s": None,
                "peak_mb": None,
                "base_mb": None,
                "error": f"timed out after {timeout_s:.0f} s",
            }
        wall = time.perf_counter() - start
        err.seek(0)
        text = err.read().decode(errors="replace")
    marks = [line.split() for line in text.splitlines() if line.startswith("VMHWM_KB ")]
    ok = proc.returncode == 0 and bool(marks)
    peak, base = (int(marks[-1][1]) / 1024, int(marks[-1][3]) / 1024) if marks else (None, None)
    return {
        "ok": ok,
        "wall_s": wall,
        "peak_mb": peak,
        "base_mb": base,
        "error": None if ok else text[-800:],
    }


def hta_dir(trace: Path, workdir: Path) -> Path:
    """HTA reads a folder of rank files: link the trace in under a rank-like name."""
    folder = workdir / f"hta_{trace.name.split('.')[0]}"
    folder.mkdir(exist_ok=True)
    link = folder / ("rank-0.json.gz" if trace.name.endswith(".gz") else "rank-0.json")
    if not link.exists():
        try:
            link.symlink_to(trace.resolve())
        except OSError:
            shutil.copy2(trace, link)
    return folder


def bench_one(label: str, trace: Path, workdir: Path, repeat: int, timeout_s: float) -> dict:
    """Every tool ``repeat`` times, interleaved; the fastest run of each and the ratios."""
    row = {
        "trace": label,
        "path": _shown_path(trace),
        "file_mb": trace.stat().st_size / 1e6,
        "json_mb": _json_bytes(trace) / 1e6,
    }
    args = {
        "workbench": str(trace),
        "workbench_memory": str(trace),
        "hta": str(hta_dir(trace, workdir)),
        "orjson": str(trace),
    }
    runs: dict[str, list] = {tool: [] for tool in TOOLS}
    for _ in range(repeat):
        for tool, code in TOOLS.items():
            if runs[tool] and not runs[tool][-1]["ok"]:
                continue  # a tool that failed (or timed out) once is not retried
            runs[tool].append(run_child(code, args[tool], timeout_s))
    for tool, results in runs.items():
        row[tool] = _best(results)
    row |= ratios(row["workbench"], row["hta"], row["orjson"], row["workbench_memory"])
    return row


def _best(results: list[dict]) -> dict:
    good = [r for r in results if r["ok"]]
    if not good:
        return results[-1] | {"walls_s": []}
    best = min(good, key=lambda r: r["wall_s"])
    return best | {
        "walls_s": [round(r["wall_s"], 3) for r in good],
        "peak_mb": max(r["peak_mb"] for r in good),
        "above_base_mb": max(r["peak_mb"] - r["base_mb"] for r in good),
    }


def ratios(wb: dict, hta: dict, oj: dict, wb_memory: dict | None = None) -> dict:
    """The three goal ratios (None where a tool failed: a crash is not a load time) and their verdicts.

    Times and peaks come from ``wb`` (the command as a user runs it); the memory growth above the
    post-import baseline from ``wb_memory`` (the same work, imports first) when given.
    """
    wb_memory = wb if wb_memory is None else wb_memory
    wb, hta, oj, wb_memory = (r if r["ok"] else {} for r in (wb, hta, oj, wb_memory))
    out = {
        "speedup_vs_hta": _ratio(hta.get("wall_s"), wb.get("wall_s")),
        "time_vs_orjson": _ratio(wb.get("wall_s"), oj.get("wall_s")),
        "memory_vs_hta": _ratio(wb_memory.get("above_base_mb"), hta.get("above_base_mb")),
        "peak_vs_hta": _ratio(wb.get("peak_mb"), hta.get("peak_mb")),
    }
    out["goals_met"] = {
        "3x_faster_than_hta": _at_least(out["speedup_vs_hta"], 3.0),
        "within_2x_of_orjson": _at_most(out["time_vs_orjson"], 2.0),
        "half_hta_memory": _at_most(out["memory_vs_hta"], 0.5),
    }
    return out


def _json_bytes(path: Path) -> int:
    """Size of the JSON text: the file's, or a gzip's ISIZE (its last 4 bytes; below 4 GiB)."""
    with open(path, "rb") as stream:
        if stream.read(2) != b"\x1f\x8b":
            return path.stat().st_size
        stream.seek(-4, os.SEEK_END)
        return int.from_bytes(stream.read(4), "little")


def _shown_path(path: Path) -> str:
    """Inside the repository or ../shared: relative to the repository; elsewhere (a temporary file): the name."""
    where = path.resolve().parents
    if ROOT in where or ROOT.parent / "shared" in where:
        return os.path.relpath(path.resolve(), ROOT)
    return path.name


def _ratio(a, b):
    return a / b if a and b else None


def _at_least(x, bound):
    return None if x is None else x >= bound


def _at_most(x, bound):
    return None if x is None else x <= bound


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'trace':<36} {'JSON MB':>7} | {'wb s':>6} {'+MB':>6} {'MB':>6} | {'HTA s':>6} {'+MB':>6} {'MB':>6} | "
        f"{'orj s':>6} {'MB':>6} | {'HTA/wb':>6} {'wb/orj':>6} {'+mem wb/HTA':>11}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        cells = []
        for k in ("workbench", "hta", "orjson"):
            t = r[k]
            extra = (
                []
                if k == "orjson"
                else [(r["workbench_memory"] if k == "workbench" else t).get("above_base_mb")]
            )
            values = [t.get("wall_s"), *extra, t.get("peak_mb")]
            cells.append(
                " ".join(_fmt(v, 6, 2 if i == 0 else 0) for i, v in enumerate(values))
                if t["ok"]
                else f"{'failed':>{20 if k != 'orjson' else 13}}"
            )
        print(
            f"{r['trace']:<36} {r['json_mb']:>7.1f} | "
            + " | ".join(cells)
            + f" | {_fmt(r['speedup_vs_hta'], 6)} {_fmt(r['time_vs_orjson'], 6)} {_fmt(r['memory_vs_hta'], 11)}"
        )
        for k in TOOLS:
            if not r[k]["ok"]:
                print(
                    f"    {k} failed: {r[k]['error'].strip().splitlines()[-1] if r[k]['error'] else '?'}"
                )


def _fmt(x, width, digits=2):
    return f"{'-':>{width}}" if x is None else f"{x:>{width}.{digits}f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument(
        "--synthetic-mb",
        type=float,
        nargs="*",
        default=[200, 1000],
        help="sizes of the synthetic traces to write and time (MB of JSON)",
    )
    parser.add_argument(
        "--trace",
        type=Path,
        action="append",
        help="real trace(s) to time (default: ../shared/traces)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each tool per trace, interleaved"
    )
    parser.add_argument(
        "--workdir", type=Path, help="where synthetic traces go (default: a temp folder, removed)"
    )
    parser.add_argument("--timeout", type=float, default=900, help="per-process limit in seconds")
    parser.add_argument(
        "--smoke", action="store_true", help="one tiny synthetic trace, one run (for tests)"
    )
    args = parser.parse_args(argv)
    from tests.support.synthetic import write_synthetic_trace

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="wb_bench_trace_"))
    workdir.mkdir(parents=True, exist_ok=True)
    repeat = 1 if args.smoke else args.repeat
    traces = [] if args.smoke else (args.trace or real_traces())
    rows = []
    for path in traces:
        rows.append(bench_one(path.name, path, workdir, repeat, args.timeout))
        print(f"  done {path.name}", file=sys.stderr, flush=True)
    for mb in [0.2] if args.smoke else args.synthetic_mb:
        path = workdir / f"synthetic_{mb:g}mb.json"
        if not path.exists():
            write_synthetic_trace(path, int(mb * 1e6))
        rows.append(
            bench_one(
                f"synthetic {mb:g} MB", path, workdir, 1 if mb >= 1000 else repeat, args.timeout
            )
        )
        print(f"  done synthetic {mb:g} MB", file=sys.stderr, flush=True)
    print_table(rows)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "python": sys.version.split()[0],
                    "cpus": os.cpu_count(),
                    "load_average": os.getloadavg(),
                    "repeat": repeat,
                    "rows": rows,
                },
                indent=2,
            )
        )
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def real_traces() -> list[Path]:
    """Every trace in ``../shared/traces`` (``*.json.gz``: not its REFERENCE.json), smallest first."""
    found = SHARED_TRACES.glob("*.json.gz") if SHARED_TRACES.is_dir() else []
    return sorted(found, key=lambda p: p.stat().st_size)


if __name__ == "__main__":
    sys.exit(main())
