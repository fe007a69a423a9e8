"""Python stacks inside stages: torch.profiler ``with_stack`` against a pyinstrument sampler.

Question (issue: explain the tail): which way of seeing Python frames inside a
stage costs less, and which shows more? On the image example (bs 1, one torch
thread), the same requests run interleaved in blocks under four modes:

* ``plain``: the timing run (two clock reads per stage);
* ``trace``: torch.profiler, CPU activity, ``with_stack=False`` (today's traced run);
* ``trace+stack``: torch.profiler with ``with_stack=True`` (python_function events in the trace);
* ``sampler``: pyinstrument at a 1 ms interval around the requests.

For each mode: mean time per stage (ms) and the overhead against ``plain``;
and what each shows: the share of ``preprocess`` time spent in PIL frames
(the acceptance figure: at least half).

Run: ``python benchmarks/bench_stacks.py [--requests 60] [--blocks 5]``; writes
``benchmarks/results/stacks.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def marked(name: str, fn):
    """``fn`` behind a trampoline whose code name is ``workbench.stage::name`` (a sampler sees the stage)."""

    def trampoline(x):
        return fn(x)

    code = trampoline.__code__.replace(
        co_name=f"workbench_stage__{name}", co_qualname=f"workbench_stage__{name}"
    )
    return types.FunctionType(code, {"fn": fn}, closure=trampoline.__closure__)


def time_stages(names, fns, batches) -> dict[str, int]:
    """Stage -> summed ns over ``batches``, two clock reads per stage (the timing run's cost)."""
    totals = dict.fromkeys(names, 0)
    for batch in batches:
        out = batch
        for name, fn in zip(names, fns):
            t0 = time.perf_counter_ns()
            out = fn(out)
            totals[name] += time.perf_counter_ns() - t0
    return totals


def run_plain(pipe, batches):
    return time_stages(pipe.stage_names, [s.fn for s in pipe.stages], batches)


def run_traced(pipe, batches, with_stack: bool, out_dir: Path):
    from torch.profiler import ProfilerActivity, profile, record_function

    names, fns = pipe.stage_names, [s.fn for s in pipe.stages]
    totals = dict.fromkeys(names, 0)
    with profile(activities=[ProfilerActivity.CPU], with_stack=with_stack) as prof:
        for batch in batches:
            out = batch
            for name, fn in zip(names, fns):
                t0 = time.perf_counter_ns()
                with record_function(f"workbench.stage::{name}"):
                    out = fn(out)
                totals[name] += time.perf_counter_ns() - t0
    path = out_dir / f"trace-{with_stack}-{time.perf_counter_ns()}.json"
    prof.export_chrome_trace(str(path))
    return totals, path


def run_sampled(pipe, batches, interval_s: float):
    from pyinstrument import Profiler

    names = pipe.stage_names
    fns = [marked(n, s.fn) for n, s in zip(names, pipe.stages)]
    profiler = Profiler(interval=interval_s)
    profiler.start()
    totals = time_stages(names, fns, batches)
    session = profiler.stop()
    return totals, session


def pil_share_in_trace(path: Path) -> float:
    """Share of preprocess host time inside PIL python frames (outermost PIL frames only)."""
    from workbench.analysis.flame import flame_tree
    from workbench.trace import load_trace

    tree = flame_tree(load_trace(path).events)
    stage = tree[(tree["kind"] == "stage") & (tree["name"] == "preprocess")]
    if stage.empty:
        return float("nan")
    parents = dict(zip(tree["id"], tree["parent"]))
    names = dict(zip(tree["id"], tree["name"]))
    stage_ids = set(stage["id"])

    def under_stage_outermost_pil(node):
        p = parents[node]
        while p != -1:
            if "PIL/" in str(names[p]):
                return False
            if p in stage_ids:
                return True
            p = parents[p]
        return False

    pil = tree[tree["name"].astype(str).str.contains("PIL/")]
    total = sum(int(r.total_ns) for r in pil.itertuples() if under_stage_outermost_pil(r.id))
    return total / int(stage["total_ns"].sum())


def pil_share_in_session(session, interval_s: float) -> tuple[float, int]:
    """Share of sampled preprocess time inside PIL frames, and the number of samples in preprocess."""
    root = session.root_frame()
    stage_time, pil_time = 0.0, 0.0

    def walk(frame, in_stage, in_pil):
        nonlocal stage_time, pil_time
        if frame.function == "workbench_stage__preprocess" and not in_stage:
            stage_time += frame.time
            in_stage = True
        is_pil = "/PIL/" in (frame.file_path or "")
        if in_stage and is_pil and not in_pil:
            pil_time += frame.time
            in_pil = True
        for child in frame.children:
            walk(child, in_stage, in_pil)

    if root is not None:
        walk(root, False, False)
    samples = int(
        round(stage_time / interval_s)
    )  # pyinstrument: one sample per interval of wall time
    return (pil_time / stage_time if stage_time else float("nan")), samples


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=40, help="requests per block and mode")
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--interval-ms", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "stacks.md")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from workbench import PipelineConfig
    from workbench.examples import factory
    from workbench.pipeline import build_pipeline

    pipe = build_pipeline(factory("image"), PipelineConfig(batch_size=1))
    items = pipe.item_iterator()
    batches = [[next(items)] for _ in range(args.requests)]
    run_plain(pipe, batches[:10])  # warm-up
    modes = ("plain", "trace", "trace+stack", "sampler")
    sums = {m: dict.fromkeys(pipe.stage_names, 0) for m in modes}
    shares = {"trace+stack": [], "sampler": []}
    samples = 0
    with tempfile.TemporaryDirectory() as tmp:
        for block in range(args.blocks):
            order = list(modes) if block % 2 == 0 else list(reversed(modes))
            for mode in order:
                if mode == "plain":
                    t = run_plain(pipe, batches)
                elif mode == "trace":
                    t, _ = run_traced(pipe, batches, False, Path(tmp))
                elif mode == "trace+stack":
                    t, path = run_traced(pipe, batches, True, Path(tmp))
                    shares["trace+stack"].append(pil_share_in_trace(path))
                else:
                    t, session = run_sampled(pipe, batches, args.interval_ms / 1000)
                    share, n = pil_share_in_session(session, args.interval_ms / 1000)
                    shares["sampler"].append(share)
                    samples += n
                for k, v in t.items():
                    sums[mode][k] += v
    n = args.requests * args.blocks
    lines = [
        "# Python stacks inside stages: overhead and what each shows",
        "",
        f"`python benchmarks/bench_stacks.py --requests {args.requests} --blocks {args.blocks}` "
        f"(image example, batch 1, torch threads 1, {n} requests per mode, modes interleaved by block; "
        f"sampler interval {args.interval_ms} ms). Host: {os.cpu_count()} cores; "
        f"{'machine shared with other jobs' if os.getloadavg()[0] > 1.0 else 'quiet machine'} "
        f"(load average {os.getloadavg()[0]:.1f} at the end).",
        "",
        "| stage | "
        + " | ".join(f"{m} ms" for m in modes)
        + " | trace+stack / plain | sampler / plain |",
        "|---|" + "---|" * (len(modes) + 2),
    ]
    for s in pipe.stage_names:
        means = {m: sums[m][s] / n / 1e6 for m in modes}
        lines.append(
            f"| {s} | "
            + " | ".join(f"{means[m]:.3f}" for m in modes)
            + f" | {means['trace+stack'] / means['plain']:.2f}x | {means['sampler'] / means['plain']:.2f}x |"
        )
    total = {m: sum(sums[m].values()) / n / 1e6 for m in modes}
    lines.append(
        "| **all stages** | "
        + " | ".join(f"{total[m]:.3f}" for m in modes)
        + f" | {total['trace+stack'] / total['plain']:.2f}x | {total['sampler'] / total['plain']:.2f}x |"
    )
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    lines += [
        "",
        "What each shows (share of `preprocess` time inside PIL frames; acceptance: at least 50 %):",
        "",
        f"- trace+stack: {mean(shares['trace+stack']):.0%} (exact: every Python call is an event in the same "
        "trace as the operators and kernels, so the flame graph nests stage -> Python -> ops -> kernels)",
        f"- sampler: {mean(shares['sampler']):.0%} (statistical, about {samples} samples in preprocess over "
        f"{n} requests at {args.interval_ms} ms)",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
