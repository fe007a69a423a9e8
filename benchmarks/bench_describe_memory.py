"""What ``describe=`` holds in memory: a timing run at batch 512 with and without it.

Question (issue 25, item 4): the text example's ``preprocess`` declares
``describe=`` (its padding). Does profiling with it hold the stage outputs
(512 padded token rows per request) until the run ends? Each mode runs in a
fresh child process (peak RSS is per process): ``profile("text", batch 512,
one torch thread)``, no traced run, ``--requests`` measured requests; the
child reports the run's own memory trend (``meta.memory``: RSS growth over the
measured requests and the leak verdict) and its peak RSS (``ru_maxrss``).

Run: ``python benchmarks/bench_describe_memory.py [--requests 40] [--md PATH] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODES = ("describe", "no describe")


def child(mode: str, requests: int, batch: int) -> dict:
    from workbench import PipelineConfig, profile
    from workbench.examples import factory
    from workbench.pipeline import resolve_pipeline

    pipe = resolve_pipeline(factory("text"), PipelineConfig(batch_size=batch, threads=1))
    if mode == "no describe":
        pipe = dataclasses.replace(
            pipe, stages=[dataclasses.replace(s, describe=None) for s in pipe.stages]
        )
    run = profile(pipe, requests=requests, warmup=2, traced=0, max_duration_s=None)
    memory = run.meta.memory
    memory = memory.to_dict() if hasattr(memory, "to_dict") else dict(memory)
    samples = memory.get("samples_mb") or []
    return {
        "mode": mode,
        "requests": requests,
        "batch_size": batch,
        "rss_first_mb": samples[0] if samples else None,
        "rss_last_mb": samples[-1] if samples else None,
        "growth_mb": memory.get("growth_mb"),
        "leak_suspected": memory.get("leak_suspected"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "attributes": sorted(c for c in run.requests.columns if c.startswith("attr.")),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--child", choices=MODES)
    parser.add_argument("--label", default="", help="what the runner does (before/after a change)")
    parser.add_argument("--md", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.requests, args.batch)))
        return 0
    rows = []
    for mode in MODES:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                mode,
                "--requests",
                str(args.requests),
                "--batch",
                str(args.batch),
            ],
            capture_output=True,
            text=True,
            check=True,
            env=os.environ | {"OMP_NUM_THREADS": "1"},
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    load = os.getloadavg()[0]
    lines = [
        f"## describe= memory at batch {args.batch} {args.label}".rstrip(),
        "",
        f"`python benchmarks/bench_describe_memory.py --requests {args.requests} --batch {args.batch}` (text "
        f"example, one torch thread, {args.requests} measured requests, no traced run). Busy machine "
        f"(load average {load:.1f}): memory figures do not depend on it.",
        "",
        "| mode | RSS first MB | RSS last MB | growth MB | leak suspected | peak RSS MB |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['rss_first_mb']:.1f} | {r['rss_last_mb']:.1f} | {r['growth_mb']:.1f} | "
            f"{r['leak_suspected']} | {r['peak_rss_mb']:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        with args.md.open("a") as f:
            f.write(text + "\n")
    if args.json:
        previous = json.loads(args.json.read_text()) if args.json.is_file() else []
        args.json.write_text(json.dumps(previous + [{"label": args.label, "rows": rows}], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
