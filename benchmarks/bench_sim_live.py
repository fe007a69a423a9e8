"""The simulator calibrated from a paced profile against a live in-process ``load``, at three rates.

Question (issue 37, item 7): back-to-back ``profile`` runs under-predict a live run's service times
(a request after an idle gap is slower). Is ``simulate --service RUN`` with RUN the default paced
profile closer to a live ``load`` of the same rate, seed and schedule than the closed-loop profile?
The goal on a quiet machine: simulated/live p50 within 15 %, p99 within 25 %.

Per round: a closed-loop profile and a paced profile (the default: 0.3 of the capacity) of the
example at batch size 1, one torch thread; then, in an order that alternates between rounds, a live
``load`` (max batch 1, no wait) at each load (a fraction of the paced run's closed-loop capacity),
each simulated on its own arrival schedule from three service models (``--replications`` service-draw
seeds pooled, as ``scripts/validate_batching.py`` does): closed, paced, and live (``simulate --service
LIVE``: the batch service times of another live ``load`` at the same rate, on another seed's schedule,
run just before: the server's view of service at that rate, never the checked run's own).
Rows: simulated/live p50 and p99 per model.

Run: ``python benchmarks/bench_sim_live.py [--example tabular] [--loads 0.2 0.4 0.6]
[--duration 6] [--min-duration 6] [--rounds 1] [--md PATH] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from validate_batching import GOALS, simulate_pooled  # noqa: E402

from workbench import PipelineConfig, profile  # noqa: E402
from workbench.batching.arrivals import Arrivals  # noqa: E402
from workbench.batching.live import run_load  # noqa: E402
from workbench.batching.policy import BatchPolicy  # noqa: E402
from workbench.batching.service_model import service_model_from_runs  # noqa: E402
from workbench.batching.summary import load_summary  # noqa: E402
from workbench.runner import DEFAULT_UTILIZATION, Pace  # noqa: E402

POLICY = BatchPolicy(1, 0.0)


def calibrate(example: str, config: PipelineConfig, min_duration_s: float) -> tuple:
    """The closed-loop and the paced service models, and the capacity the paced run measured."""
    common = {"warmup": 10, "traced": 0, "sample_stacks": False}
    closed = profile(example, config, requests=600, **common)
    paced = profile(
        example,
        config,
        requests=300,
        pace=Pace(utilization=DEFAULT_UTILIZATION, min_duration_s=min_duration_s),
        **common,
    )
    models = {
        "closed": service_model_from_runs([closed]),
        "paced": service_model_from_runs([paced]),
    }
    return models, paced.meta.timing.pacing["capacity_rps"]


MODELS = ("closed", "paced", "live")
CALIBRATION_SEED = 1000  # the live calibration's schedule: another seed than every checked run's


def live_load(example, config, rate_rps: float, duration_s: float, seed: int):
    """A live in-process ``load`` (max batch 1, no wait) and its Poisson schedule."""
    arrivals = Arrivals("poisson", rate_rps=rate_rps, duration_s=duration_s, seed=seed)
    run = run_load(example, config, arrivals=arrivals, policy=POLICY, drain_timeout_s=120.0)
    return run, arrivals


def one_rate(example, config, models, capacity, load, args, seed) -> dict:
    rate = round(load * capacity, 1)
    calibration, _ = live_load(example, config, rate, args.duration, CALIBRATION_SEED + seed)
    models = models | {"live": service_model_from_runs([calibration])}
    live, arrivals = live_load(example, config, rate, args.duration, seed)
    summary = load_summary(live.requests, POLICY.concurrency)
    lv = summary["end_to_end"]
    row = {
        "load": load,
        "rate_rps": arrivals.rate_rps,
        "requests": summary["requests"],
        "lag_p99_ms": live.meta.load.generator_lag_p99_ms,
        "live_p50_ms": lv["p50_ms"],
        "live_p99_ms": lv["p99_ms"],
    }
    for name, model in models.items():
        sim = simulate_pooled(model, arrivals.times_ns(), POLICY, args.replications)["end_to_end"]
        for q in ("p50", "p99"):
            ratio = sim[f"{q}_ms"] / row[f"live_{q}_ms"]
            row |= {f"{name}_{q}_ms": sim[f"{q}_ms"], f"{name}_{q}_ratio": ratio}
            row[f"{name}_{q}_pass"] = abs(ratio - 1) <= GOALS[q]
    return row


def markdown(rows: list[dict], args, wall_s: float) -> str:
    load = os.getloadavg()
    lines = [
        "# bench_sim_live: the simulator calibrated from a paced profile against live load",
        "",
        f"`python benchmarks/bench_sim_live.py --example {args.example} --loads "
        f"{' '.join(f'{x:g}' for x in args.loads)} --duration {args.duration:g} --min-duration "
        f"{args.min_duration:g} --rounds {args.rounds}` in {wall_s:.0f} s; load average "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores at the end (a busy "
        "machine when above 1 per core). Batch size 1, no wait, one torch thread. Ratio = simulated / "
        "live end to end; goal |ratio - 1| <= 0.15 on p50 and 0.25 on p99.",
        "",
        "| round | load | rate/s | live p50 ms | live p99 ms | lag p99 ms | "
        + " | ".join(f"{m} {q} ratio" for q in ("p50", "p99") for m in MODELS)
        + " |",
        "|---|---|---|---|---|---|" + "---|" * 2 * len(MODELS),
    ]
    for r in rows:
        ratios = " | ".join(f"{r[f'{m}_{q}_ratio']:.2f}" for q in ("p50", "p99") for m in MODELS)
        lines.append(
            f"| {r['round']} | {r['load']:g} | {r['rate_rps']:.0f} | {r['live_p50_ms']:.3g} | "
            f"{r['live_p99_ms']:.3g} | {r['lag_p99_ms']:.3g} | {ratios} |"
        )
    for name in MODELS:
        passed = {q: sum(r[f"{name}_{q}_pass"] for r in rows) for q in ("p50", "p99")}
        lines.append(
            f"\n{name}: p50 within 15 % in {passed['p50']}/{len(rows)}, p99 within 25 % in "
            f"{passed['p99']}/{len(rows)}"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="tabular")
    parser.add_argument("--loads", nargs="+", type=float, default=[0.2, 0.4, 0.6])
    parser.add_argument("--duration", type=float, default=6.0, help="seconds of each live load")
    parser.add_argument("--min-duration", type=float, default=6.0, help="of the paced profile")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--replications", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--md", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    config = PipelineConfig(batch_size=1, threads=1)
    started, rows = time.perf_counter(), []
    for k in range(args.rounds):
        models, capacity = calibrate(args.example, config, args.min_duration)
        loads = args.loads if k % 2 == 0 else args.loads[::-1]  # interleaved: the order alternates
        for load in loads:
            row = one_rate(args.example, config, models, capacity, load, args, args.seed + k)
            rows.append({"round": k + 1, "capacity_rps": capacity} | row)
    text = markdown(rows, args, time.perf_counter() - started)
    print(text)
    if args.md:
        args.md.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "load": os.getloadavg()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
