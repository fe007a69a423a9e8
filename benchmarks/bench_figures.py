"""Figure build time and payload for every trace figure, from a 1,000,000-event table.

Goal (issue 5): from a loaded events table, any trace becomes a figure in < 2 s
with ``len(fig.to_json()) < 3 MB``. Each figure is timed (build, then
``to_json``) on a synthetic events table built straight in numpy (no loader
time counted), and on the largest real trace in ``../shared/traces`` when
present. Naive peers in the same run: an icicle of the unpruned flame tree,
every GPU event as its own bar (what ``px.timeline`` of raw events ships), and
raw launch times shipped to ``go.Histogram``/``go.Scatter``; ratios are
naive / ours (> 1: ours is faster or smaller).

    python benchmarks/bench_figures.py [--events N] [--json PATH] [--no-baseline]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.naming import stage_range_name  # noqa: E402
from workbench.trace.schema import COLUMNS, KIND_DTYPE  # noqa: E402

GOAL_S = 2.0
GOAL_BYTES = 3_000_000

# --- a synthetic events table -------------------------------------------------------------
# Shaped like a traced inference loop: ProfilerStep#k -> three stage ranges -> operator ->
# runtime call -> GPU work (kernel, HtoD pageable / DtoH pinned copy, memset) on stream 7
# with a shared correlation, plus a device synchronize per step. Kernel names are drawn
# from ``distinct_kernels`` long templated names, as in real traces, so an unpruned flame
# tree is large. Columns and dtypes are those of workbench.trace.schema.

CHAINS = {"preprocess": 6, "forward": 36, "postprocess": 4}
OPS = ["aten::linear", "aten::relu", "aten::add", "aten::conv2d", "aten::mean", "aten::layer_norm"]
EVENTS_PER_STEP = 1 + len(CHAINS) + 3 * sum(CHAINS.values()) + 2
EPOCH_NS = 1_712_345_678_901_234_567


def kernel_names(n: int) -> list[str]:
    return [
        f"void at::native::elementwise_kernel<128, {i % 8}, at::native::gpu_kernel_impl_nocast<"
        f"at::native::BinaryFunctor<float, float, float, op_{i}> >(at::TensorIteratorBase&)>(int, T{i})"
        for i in range(n)
    ]


def synthetic_events(
    n_events: int = 1_000_000, *, seed: int = 0, distinct_kernels: int = 3_000
) -> pd.DataFrame:
    """At least ``n_events`` rows (whole steps), sorted by start; exact int64 ns times."""
    rng = np.random.default_rng(seed)
    steps = -(-n_events // EVENTS_PER_STEP)
    per_step = sum(CHAINS.values())
    n = steps * per_step
    step_of = np.repeat(np.arange(steps), per_step)
    stage_of = np.tile(np.repeat(np.arange(len(CHAINS)), list(CHAINS.values())), steps)
    first_in_stage = (
        np.r_[True, stage_of[1:] != stage_of[:-1]] | np.r_[True, step_of[1:] != step_of[:-1]]
    )
    first_in_step = np.r_[True, step_of[1:] != step_of[:-1]]
    op_dur = rng.integers(8_000, 30_000, n)
    gap = rng.integers(500, 3_000, n) + 2_000 * first_in_stage + 40_000 * first_in_step
    op_ts = EPOCH_NS + np.cumsum(gap + op_dur) - op_dur
    launch_ts = op_ts + rng.integers(1_000, 3_000, n)
    launch_dur = rng.integers(3_000, 5_000, n)
    gpu_kind = _gpu_kinds(rng, stage_of)
    gpu_dur = np.where(
        gpu_kind == 0, rng.integers(1_000, 16_000, n), rng.integers(2_000, 30_000, n)
    )
    ready = launch_ts + launch_dur + rng.integers(1_000, 20_000, n)
    before = np.cumsum(gpu_dur) - gpu_dur  # a stream runs one thing at a time
    gpu_ts = before + np.maximum.accumulate(ready - before)
    parts = [
        _chains(
            rng, op_ts, op_dur, launch_ts, launch_dur, gpu_ts, gpu_dur, gpu_kind, distinct_kernels
        ),
        _ranges(op_ts, op_dur, step_of, stage_of, steps),
    ]
    table = pd.concat(parts, ignore_index=True).sort_values(
        ["ts_ns", "dur_ns"], ascending=[True, False], kind="stable"
    )
    return _typed(table.reset_index(drop=True))


def _gpu_kinds(rng, stage_of: np.ndarray) -> np.ndarray:
    """0 kernel, 1 HtoD pageable copy, 2 DtoH pinned copy, 3 memset."""
    kind = np.where(rng.random(stage_of.size) < 0.04, 3, 0)
    kind = np.where((stage_of == 0) & (rng.random(stage_of.size) < 0.5), 1, kind)
    return np.where((stage_of == 2) & (rng.random(stage_of.size) < 0.5), 2, kind)


def _chains(
    rng, op_ts, op_dur, launch_ts, launch_dur, gpu_ts, gpu_dur, gpu_kind, distinct
) -> pd.DataFrame:
    n = op_ts.size
    corr = np.arange(1, n + 1)
    knames = np.array(
        kernel_names(distinct)
        + ["Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)", "Memset (Device)"],
        dtype=object,
    )
    gname = np.where(gpu_kind == 0, rng.integers(0, distinct, n), distinct + gpu_kind - 1)
    runtime = np.array(
        ["cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemcpyAsync", "cudaMemsetAsync"], dtype=object
    )
    gcat = np.array(["kernel", "gpu_memcpy", "gpu_memcpy", "gpu_memset"], dtype=object)
    gbytes = np.array([-1, 602_112, 4_000, 4_096])[gpu_kind]
    host = dict(pid="4242", tid="4242")
    return pd.concat(
        [
            _frame(
                op_ts,
                op_dur,
                np.array(OPS, dtype=object)[rng.integers(0, len(OPS), n)],
                "cpu_op",
                **host,
            ),
            _frame(
                launch_ts, launch_dur, runtime[gpu_kind], "cuda_runtime", correlation=corr, **host
            ),
            _frame(
                gpu_ts,
                gpu_dur,
                knames[gname],
                gcat[gpu_kind],
                pid="0",
                tid="7",
                correlation=corr,
                bytes_=np.where(gbytes < 0, np.iinfo(np.int64).min, gbytes),
                device=0,
                stream=7,
            ),
        ],
        ignore_index=True,
    )


def _ranges(op_ts, op_dur, step_of, stage_of, steps) -> pd.DataFrame:
    ends = op_ts + op_dur
    keys = step_of * len(CHAINS) + stage_of
    st_start = pd.Series(op_ts).groupby(keys).min().to_numpy() - 1_000
    st_end = pd.Series(ends).groupby(keys).max().to_numpy() + 1_000
    names = np.array([stage_range_name(s) for s in CHAINS], dtype=object)[
        np.arange(st_start.size) % len(CHAINS)
    ]
    step_start = st_start[:: len(CHAINS)] - 1_000
    sync_ts = st_end[len(CHAINS) - 1 :: len(CHAINS)] + 1_000
    sync_dur = np.full(steps, 15_000)
    step_end = sync_ts + sync_dur + 1_000
    host = dict(pid="4242", tid="4242")
    return pd.concat(
        [
            _frame(st_start, st_end - st_start, names, "user_annotation", **host),
            _frame(
                step_start,
                step_end - step_start,
                np.array([f"ProfilerStep#{k}" for k in range(steps)], dtype=object),
                "user_annotation",
                **host,
            ),
            _frame(sync_ts, sync_dur, "cudaDeviceSynchronize", "cuda_runtime", **host),
            _frame(
                sync_ts + 1_000,
                sync_dur - 2_000,
                "cudaDeviceSynchronize",
                "cuda_sync",
                pid="0",
                tid="7",
                device=0,
                stream=7,
            ),
        ],
        ignore_index=True,
    )


def _frame(
    ts, dur, name, cat, *, pid, tid, correlation=None, bytes_=None, device=None, stream=None
) -> pd.DataFrame:
    n = len(ts)
    na = np.iinfo(np.int64).min

    def col(v):
        return (
            np.full(n, na, np.int64)
            if v is None
            else np.broadcast_to(np.asarray(v, np.int64), (n,))
        )

    return pd.DataFrame(
        {
            "ts_ns": np.asarray(ts, np.int64),
            "dur_ns": np.asarray(dur, np.int64),
            "name": np.broadcast_to(np.asarray(name, dtype=object), (n,)),
            "cat": np.broadcast_to(np.asarray(cat, dtype=object), (n,)),
            "pid": pid,
            "tid": tid,
            "device": col(device),
            "stream": col(stream),
            "correlation": col(correlation),
            "bytes": col(bytes_),
            "ext_id": col(None),
        }
    )


_KIND = {
    "cpu_op": "cpu_op",
    "user_annotation": "user_annotation",
    "cuda_runtime": "runtime",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "cuda_sync": "sync",
}


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    na = np.iinfo(np.int64).min
    out = {"ts_ns": table["ts_ns"].to_numpy(np.int64), "dur_ns": table["dur_ns"].to_numpy(np.int64)}
    for c in ("name", "cat", "pid", "tid"):
        out[c] = pd.Categorical(table[c].astype(str))
    out["kind"] = pd.Categorical(table["cat"].map(_KIND).astype(str), dtype=KIND_DTYPE)
    for c in ("device", "stream", "correlation", "bytes", "ext_id"):
        v = table[c].to_numpy(np.int64)
        out[c] = pd.arrays.IntegerArray(v, v == na)
    return pd.DataFrame(out, columns=list(COLUMNS))


# --- figures and naive peers --------------------------------------------------------------


def figures() -> dict:
    """Name -> builder(events) of every trace figure, as a user calls them."""
    import workbench.plots as plots

    return {
        "flame graph (icicle)": plots.trace_flame_figure,
        "request flame chart": plots.request_flame_chart,
        "kernel launches": plots.launch_figure,
        "transfers": plots.transfer_figure,
        "GPU timeline": plots.gpu_timeline_figure,
        "step breakdown": plots.step_breakdown_figure,
    }


def naive_icicle(events: pd.DataFrame):
    """Every node of the flame tree, no pruning, widths from totals."""
    import plotly.graph_objects as go

    from workbench.analysis.flame import flame_tree

    tree = flame_tree(events)
    return go.Figure(
        go.Icicle(
            ids=tree["id"].astype(str),
            parents=tree["parent"].map(lambda p: "" if p < 0 else str(p)),
            labels=tree["name"],
            values=tree["total_ns"],
            branchvalues="remainder",
        )
    )


def naive_gpu_bars(events: pd.DataFrame):
    """Every GPU event as its own horizontal bar (what px.timeline of raw events sends)."""
    import plotly.graph_objects as go

    gpu = events[events["kind"].isin(["kernel", "memcpy", "memset"])]
    t0 = int(gpu["ts_ns"].min())
    return go.Figure(
        go.Bar(
            base=(gpu["ts_ns"] - t0) / 1e6,
            x=gpu["dur_ns"] / 1e6,
            y=gpu["stream"].astype(str),
            orientation="h",
            text=gpu["name"].astype(str),
        )
    )


def naive_launches(events: pd.DataFrame):
    """Raw launch delays to go.Histogram and raw (cpu, gpu) pairs to go.Scatter."""
    from plotly.subplots import make_subplots

    from workbench.analysis.launches import launch_pairs
    from workbench.trace import Trace

    pairs = launch_pairs(Trace(events))
    fig = make_subplots(rows=1, cols=2)
    fig.add_histogram(x=pairs["launch_delay_ns"] / 1e3, row=1, col=1)
    fig.add_scatter(
        x=pairs["cpu_dur_ns"] / 1e3, y=pairs["gpu_dur_ns"] / 1e3, mode="markers", row=1, col=2
    )
    return fig


NAIVE = {
    "flame graph (icicle)": naive_icicle,
    "GPU timeline": naive_gpu_bars,
    "kernel launches": naive_launches,
}


def measure(build, events: pd.DataFrame) -> dict:
    t0 = time.perf_counter()
    fig = build(events)
    t1 = time.perf_counter()
    payload = len(fig.to_json())
    t2 = time.perf_counter()
    return {"build_s": t1 - t0, "json_s": t2 - t1, "total_s": t2 - t0, "bytes": payload}


def run(events: pd.DataFrame, baseline: bool) -> list[dict]:
    rows = []
    for name, build in figures().items():
        row = {"figure": name, **measure(build, events)}
        row["meets_goal"] = row["total_s"] < GOAL_S and row["bytes"] < GOAL_BYTES
        if baseline and name in NAIVE:
            naive = measure(NAIVE[name], events)
            row |= {f"naive_{k}": v for k, v in naive.items()}
            row["time_ratio"] = naive["total_s"] / row["total_s"]
            row["bytes_ratio"] = naive["bytes"] / row["bytes"]
        rows.append(row)
    return rows


def print_table(title: str, rows: list[dict]) -> None:
    print(title)
    print(
        f"{'figure':<22}{'build s':>9}{'json s':>8}{'total s':>9}{'payload':>11}{'goal':>6}"
        f"{'naive s':>9}{'naive B':>12}{'x time':>8}{'x size':>9}"
    )
    for r in rows:
        naive = (
            f"{r['naive_total_s']:>9.2f}{r['naive_bytes']:>12,}{r['time_ratio']:>7.1f}x{r['bytes_ratio']:>8.0f}x"
            if "naive_bytes" in r
            else f"{'-':>9}{'-':>12}{'-':>8}{'-':>9}"
        )
        print(
            f"{r['figure']:<22}{r['build_s']:>9.2f}{r['json_s']:>8.2f}{r['total_s']:>9.2f}{r['bytes']:>11,}"
            f"{'ok' if r['meets_goal'] else 'MISS':>6}{naive}"
        )


def largest_real_trace() -> Path | None:
    folder = ROOT.parent / "shared" / "traces"
    traces = (
        sorted(folder.glob("*.json*"), key=lambda p: p.stat().st_size) if folder.is_dir() else []
    )
    traces = [
        p for p in traces if p.name.endswith((".json", ".json.gz")) and p.name != "REFERENCE.json"
    ]
    return traces[-1] if traces else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    events = synthetic_events(args.events)
    print(
        f"synthetic events table: {len(events):,} events, built in {time.perf_counter() - t0:.1f} s (not counted)"
    )
    results = {
        "goal": {"seconds": GOAL_S, "bytes": GOAL_BYTES},
        "synthetic": {"events": len(events)},
    }
    results["synthetic"]["figures"] = run(events, not args.no_baseline)
    print_table(
        f"\nsynthetic, {len(events):,} events (goal: < {GOAL_S:g} s, < {GOAL_BYTES / 1e6:g} MB)",
        results["synthetic"]["figures"],
    )
    real = largest_real_trace()
    if real is not None:
        from workbench.trace import load_events

        real_events = load_events(real)
        results["real"] = {
            "trace": real.name,
            "events": len(real_events),
            "figures": run(real_events, not args.no_baseline),
        }
        print_table(
            f"\nreal trace {real.name}, {len(real_events):,} events", results["real"]["figures"]
        )
    misses = [
        r["figure"]
        for part in ("synthetic", "real")
        if part in results
        for r in results[part]["figures"]
        if not r["meets_goal"]
    ]
    print("\ngoal met by every figure" if not misses else f"\ngoal MISSED by: {', '.join(misses)}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if not misses else 1


if __name__ == "__main__":
    raise SystemExit(main())
