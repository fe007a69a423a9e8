"""How many requests the traced run can afford: its wall time and trace size against the traced count.

Question (issue 25, item 2): the slow-request view of a trace
(``workbench.analysis.traced_tail``) compares the slowest ``ceil(5 % n)``
traced requests with the p40-p60 ones, so it rests on ``n`` traced requests.
What does each traced request cost? On the three examples (batch 1, one torch
thread, CPU, ``with_stack`` on as by default), ``profile(..., requests=20)``
runs with each count; the traced phase is timed from the last timed request
to the last traced one (profiler start, its warm-up request, the traced
requests, writing the trace), and the trace file's size is read from the run.

Run: ``python benchmarks/bench_traced_count.py [--counts 5 20 50] [--md PATH]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

EXAMPLES = ("tabular", "text", "image")


def one(example: str, traced: int) -> tuple[float, int, str]:
    from workbench import PipelineConfig, profile
    from workbench.analysis.traced_tail import slow_minus_median
    from workbench.trace import load_trace

    marks = {}

    def progress(
        done, total, phase
    ):  # the traced phase: from the end of the timing run to its last request
        marks.setdefault(phase, [time.perf_counter(), 0.0])[1] = time.perf_counter()

    run = profile(
        example,
        PipelineConfig(batch_size=1, threads=1),
        requests=20,
        warmup=2,
        traced=traced,
        max_duration_s=None,
        sample_stacks=False,
        progress=progress,
    )
    wall = marks["traced"][1] - marks["timing"][1] if "traced" in marks else 0.0
    with tempfile.TemporaryDirectory() as tmp:
        run.save(Path(tmp) / "r")
        files = sorted((Path(tmp) / "r").glob("*.json.gz"))
        size = sum(p.stat().st_size for p in files)
        note = slow_minus_median(load_trace(files[0]))["note"] if traced else ""
    return wall, size, note


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[5, 20, 50])
    parser.add_argument("--examples", nargs="+", default=list(EXAMPLES))
    parser.add_argument("--md", type=Path)
    args = parser.parse_args(argv)
    lines = [
        "# The traced run's cost against its request count",
        "",
        f"`python benchmarks/bench_traced_count.py --counts {' '.join(map(str, args.counts))}` (batch 1, one "
        f"torch thread, 20 timed requests each; traced phase: last timed request to last traced one, "
        f"the profiler's warm-up request included). "
        f"Load average {os.getloadavg()[0]:.1f} on 2 shared cores.",
        "",
        "| example | traced | traced phase s | per traced request ms | trace MB (gzip) | view |",
        "|---|---|---|---|---|---|",
    ]
    for example in args.examples:
        one(example, 1)  # the first profile of a process pays torch.profiler's start-up
        for n in args.counts:
            wall, size, note = one(example, n)
            lines.append(
                f"| {example} | {n} | {wall:.2f} | {wall / (n + 1) * 1e3:.1f} | "
                f"{size / 1e6:.2f} | {note.split(':')[1].split('(')[0].strip() if note else ''} |"
            )
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
