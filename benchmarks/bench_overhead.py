"""Per-stage instrumentation overhead of the timing run, in nanoseconds.

Times R requests through S no-op stages three ways, in one process:
  bare            the stages called in a plain loop (no timing at all)
  workbench       workbench.timing.time_request (two perf_counter_ns reads per stage)
  record_function each stage inside torch.profiler.record_function (no profiler running),
                  the peer way of marking stages
overhead per stage = (way - bare) / (R * S). Median of several repeats.

    python benchmarks/bench_overhead.py [--json PATH] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.timing import time_request  # noqa: E402

STAGES = 6
REQUESTS = 20_000
REPEATS = 7


def _noop(x):
    return x


def bare(fns, n):
    for _ in range(n):
        out = 0
        for fn in fns:
            out = fn(out)


def workbench_way(fns, n):
    names = [f"s{i}" for i in range(len(fns))]
    for _ in range(n):
        time_request(names, fns, 0)


def record_function_way(fns, n):
    from torch.profiler import record_function

    names = [f"s{i}" for i in range(len(fns))]
    for _ in range(n):
        out = 0
        for name, fn in zip(names, fns):
            with record_function(name):
                out = fn(out)


def cuda_events_way(fns, n):
    from workbench.timing import CudaStageTimer

    timer = CudaStageTimer(len(fns), sync="stage")
    names = [f"s{i}" for i in range(len(fns))]
    for _ in range(n):
        timer.time_request(names, fns, 0)


def measure(way, fns, n) -> float:
    way(fns, n // 10)  # warm-up
    samples = []
    for _ in range(REPEATS):
        t0 = time.perf_counter_ns()
        way(fns, n)
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--requests", type=int, default=REQUESTS)
    args = parser.parse_args()
    fns = [_noop] * STAGES
    n = args.requests
    base = measure(bare, fns, n)
    ways = {"workbench": workbench_way, "record_function": record_function_way}
    if args.device.startswith("cuda"):
        ways["workbench_cuda_events"] = cuda_events_way
        n_cuda = max(n // 20, 100)
    results = {}
    for name, way in ways.items():
        count = n_cuda if name == "workbench_cuda_events" else n
        base_n = base if count == n else measure(bare, fns, count)
        results[name] = (measure(way, fns, count) - base_n) / (count * STAGES)
    print(
        f"per-stage instrumentation overhead, {STAGES} no-op stages x {n} requests, median of {REPEATS}"
    )
    print(f"{'way':<24}{'ns/stage':>12}{'vs workbench':>14}")
    for name, ns in results.items():
        print(f"{name:<24}{ns:>12.1f}{ns / results['workbench']:>13.1f}x")
    verdict = "meets" if results["workbench"] < 1000 else "MISSES"
    print(f"goal: < 1000 ns per stage on CPU -> {verdict}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"stages": STAGES, "requests": n, "ns_per_stage": results}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
