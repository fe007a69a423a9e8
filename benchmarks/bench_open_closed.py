"""The default ``profile`` (paced) against ``profile --closed-loop`` on the shipped examples.

Question (issue 37, item 1): what does the default paced run cost in wall time, and how far is the
open-loop p99 (timed from the due time, and from the send) above the closed-loop p99 of the same
run's back-to-back reference on each example?

Per example: ``python -m workbench profile --example NAME --threads 1 --out DIR --json`` (the
default: 600 closed-loop requests, then paced at 0.3 of their capacity for at least
``--min-duration`` 10 s, until the p99 interval is narrow; 50 traced requests) and the same with
``--closed-loop``, each in its own process, wall time from the process start to its exit. The p99s
come from the paced run's ``timing.pacing``.

Run: ``python benchmarks/bench_open_closed.py [--examples tabular text image] [--min-duration S]
[--md PATH] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed_profile(example: str, out: Path, *more: str) -> tuple[float, dict]:
    """Wall seconds of one ``profile`` process and its run.json."""
    cmd = [sys.executable, "-m", "workbench", "profile", "--example", example, "--threads", "1"]
    started = time.perf_counter()
    done = subprocess.run(
        [*cmd, "--out", str(out), "--json", *more], cwd=ROOT, capture_output=True, text=True
    )
    wall_s = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-800:]}")
    return wall_s, json.loads((out / "run.json").read_text())


def one_example(example: str, root: Path, min_duration: float | None) -> dict:
    quick_s, _ = timed_profile(example, root / f"{example}-closed", "--closed-loop")
    more = () if min_duration is None else ("--min-duration", str(min_duration))
    paced_s, meta = timed_profile(example, root / f"{example}-paced", *more)
    pacing = meta["timing"]["pacing"]
    return {
        "example": example,
        "closed_loop_wall_s": quick_s,
        "default_wall_s": paced_s,
        "paced_wall_s": pacing["wall_s"],
        "rate_rps": pacing["rate_rps"],
        "capacity_rps": pacing["capacity_rps"],
        "requests": meta["timing"]["requests"],
        "stopped_by": meta["timing"]["stopped_by"],
        "closed_p50_ms": pacing["closed_loop"]["p50_ms"],
        "closed_p99_ms": pacing["closed_loop"]["p99_ms"],
        "paced_p50_ms": pacing["paced"]["p50_ms"],
        "paced_p99_ms": pacing["paced"]["p99_ms"],
        "service_p99_ms": pacing["service"]["p99_ms"],
        "lag_p99_ms": pacing["lag_p99_ms"],
        "p99_over_closed_loop": pacing["p99_over_closed_loop"],
        "other_cores": (meta.get("noise") or {}).get("other_cores"),
    }


def markdown(rows: list[dict], args) -> str:
    load = os.getloadavg()
    lines = [
        "# bench_open_closed: the default paced profile against the closed loop",
        "",
        f"`python benchmarks/bench_open_closed.py --examples {' '.join(args.examples)}`; load "
        f"average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores at the end (a "
        "busy machine when above 1 per core). Batch size 1, one torch thread. Wall s: the process, "
        "start to exit (import, build, measuring, traced run, summaries). Closed p99: the paced "
        "run's 600 back-to-back requests; paced p99 from the due time, service p99 from the send.",
        "",
        "| example | --closed-loop wall s | default wall s | paced s | rate/s | paced requests | "
        "stopped by | closed p50 ms | closed p99 ms | paced p50 ms | paced p99 ms | service p99 ms "
        "| service p99 / closed p99 | lag p99 ms | other cores |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['example']} | {r['closed_loop_wall_s']:.1f} | {r['default_wall_s']:.1f} | "
            f"{r['paced_wall_s']:.1f} | {r['rate_rps']:.0f} | {r['requests']} | {r['stopped_by']} | "
            f"{r['closed_p50_ms']:.3g} | {r['closed_p99_ms']:.3g} | {r['paced_p50_ms']:.3g} | "
            f"{r['paced_p99_ms']:.3g} | {r['service_p99_ms']:.3g} | "
            f"{r['p99_over_closed_loop']:.2f} | {r['lag_p99_ms']:.3g} | {r['other_cores']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="+", default=["tabular", "text", "image"])
    parser.add_argument("--min-duration", type=float, help="of the paced run (default: profile's)")
    parser.add_argument("--md", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [one_example(example, Path(tmp), args.min_duration) for example in args.examples]
    text = markdown(rows, args)
    print(text)
    if args.md:
        args.md.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "load": os.getloadavg()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
