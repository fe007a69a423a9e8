"""Does the continuous batching simulator predict a live run? The generate example at three rates.

    python benchmarks/bench_continuous.py [--duration 5] [--loads 0.3 0.6 0.85] [--md PATH]

Exit 1 when the check does not hold (a missed goal, as ``run_all.py`` counts them).

1. Calibrate: time the example's step API alone (``continuous_live.profile_steps``: prefills of
   several prompt lengths, decodes of 1..max_num_seqs sequences at several contexts) and fit the
   step model (``continuous.fit_step_times``): *alone*. Then a calibration ``load`` at
   ``--calibration-load`` of alone's capacity (another seed's arrivals than every checked run):
   its steps, timed inside the serving loop, give the model the check uses (*sim*): the line,
   each step's residual from it (``noise_ns``: spread, tail and so the mean) and the loop's own
   time between steps (``between_ns``).
2. The simulator's capacity with that model (requests/s at a rate far past it) sets the three
   rates, as shares of it.
3. At each rate: a live ``load`` of the example (continuous batching, Poisson arrivals, seeded) and
   the simulator on the same arrivals and request lengths. TTFT and ITL p50 and p99 of both
   (``analysis.tokens``), simulated over live; the check holds when every p50 is within 15 % and
   every p99 within 25 %. Goodput (TTFT and TPOT bounds) of both, and the simulator's rate where
   goodput falls below the target, from a grid of rates.
4. Beside it, *alone* (the model of steps timed alone) and *replay* (the model fitted to the
   checked run's own steps, ``load.continuous.step_model`` and ``step_noise_ns``): what is left
   between replay and live is the scheduling model's error.

The check is meant for a quiet machine; on a busy one the live steps are slower and noisier than the
calibration's (say so beside the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.analysis.tokens import token_requests, token_summary  # noqa: E402
from workbench.batching.arrivals import Arrivals  # noqa: E402
from workbench.batching.continuous import (  # noqa: E402
    ContinuousPolicy,
    StepTimes,
    fit_step_times,
    goodput,
    goodput_curve,
    simulate_continuous,
)
from workbench.batching.continuous_live import profile_steps  # noqa: E402
from workbench.batching.live import run_load  # noqa: E402
from workbench.batching.policy import BatchPolicy  # noqa: E402
from workbench.config import PipelineConfig  # noqa: E402
from workbench.examples import factory  # noqa: E402
from workbench.pipeline import resolve_pipeline  # noqa: E402

P50_TOL, P99_TOL = 0.15, 0.25
CAPACITY_RATE = 10_000.0  # req/s: far past capacity, the simulator's throughput is its capacity


def calibrate(pipe, policy: ContinuousPolicy, prompt_n: int, answer_n: int):
    steps = pipe.steps(policy.max_num_seqs)

    def item_of(p: int, a: int) -> dict:
        return {"prompt": [1 + i % 7 for i in range(p)], "answer_tokens": a}

    seqs = sorted({1, 2, max(1, policy.max_num_seqs // 2), policy.max_num_seqs})
    chunk = policy.chunk_tokens or 2 * prompt_n
    prompts = sorted({max(1, prompt_n // 2), prompt_n, min(chunk, 3 * prompt_n // 2)})
    contexts = (prompt_n // 2, prompt_n + answer_n // 2, prompt_n + answer_n)
    measured = profile_steps(
        steps, item_of, seqs=seqs, contexts=contexts, prompts=prompts, repeat=8
    )
    return fit_step_times(measured), measured


def live_load(config, policy, rate: float, duration_s: float, seed: int):
    """A live continuous batching ``load`` of the example (Poisson arrivals at ``rate``) and its
    arrival times (ns)."""
    arrivals = Arrivals("poisson", rate_rps=rate, duration_s=duration_s, seed=seed)
    batch = BatchPolicy(1, 0.0)
    run = run_load(
        "generate", config, arrivals=arrivals, policy=batch, continuous=policy, drain_timeout_s=30.0
    )
    return run, arrivals.times_ns()


def model_of(run) -> StepTimes:
    """The step model a live run fitted to its own steps (line, between, noise)."""
    cont = run.meta.load.continuous
    return StepTimes.from_dict(cont["step_model"], cont.get("step_noise_ns", ()))


def capacity_of(pipe, times: StepTimes, policy, seed: int) -> float:
    """Requests/s the simulator serves of 400 requests arriving far past its capacity."""
    many = Arrivals("poisson", rate_rps=CAPACITY_RATE, count=400, seed=seed)
    flood = simulate_continuous(many.times_ns(), lengths_of(pipe, 400), times, policy, seed=seed)
    span = (flood.requests["start_ns"] + flood.requests["dur_ns"]).max()
    return 400 * 1e9 / float(span)


def lengths_of(pipe, n: int) -> list[tuple[int, int]]:
    steps_cls = pipe.steps(1)
    it = pipe.item_iterator()
    return [steps_cls.lengths(next(it)) for _ in range(n)]


def figures(requests, stages, units) -> dict:
    t = token_summary(requests, stages, units)
    return {
        "ttft_p50_ms": t["ttft"]["p50_ms"],
        "ttft_p99_ms": t["ttft"]["p99_ms"],
        "itl_p50_ms": t["itl"]["p50_ms"],
        "itl_p99_ms": t["itl"]["p99_ms"],
        "requests": t["requests"],
        "gaps": t["itl"]["count"],
    }


def compare(sim: dict, live: dict) -> dict:
    out = {}
    for key in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms"):
        ratio = sim[key] / live[key] if live[key] else None
        tol = P50_TOL if "p50" in key else P99_TOL
        out[key] = {"ratio": ratio, "within": ratio is not None and abs(ratio - 1) <= tol}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds of arrivals per rate")
    ap.add_argument("--loads", type=float, nargs=3, default=[0.3, 0.6, 0.85])
    ap.add_argument(
        "--calibration-load", type=float, default=0.5, help="of the steps-alone capacity"
    )
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--max-batched-tokens", type=int, default=512)
    ap.add_argument("--chunk-tokens", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--answer-tokens", type=int, default=32)
    ap.add_argument("--ttft-ms", type=float, default=50.0, help="goodput's TTFT bound")
    ap.add_argument("--tpot-ms", type=float, default=10.0, help="goodput's TPOT bound")
    ap.add_argument("--target", type=float, default=0.9, help="goodput target for the knee")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--note", default="", help="what else ran on the machine")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    options = {
        "prompt_tokens": args.prompt_tokens,
        "answer_tokens": args.answer_tokens,
        "lengths": "uniform",
    }
    config = PipelineConfig(device=args.device, threads=args.threads, options=options)
    policy = ContinuousPolicy(args.max_num_seqs, args.max_batched_tokens, args.chunk_tokens)
    pipe = resolve_pipeline(factory("generate"), config)
    t0 = time.perf_counter()
    alone, measured = calibrate(pipe, policy, args.prompt_tokens, args.answer_tokens)
    calibration_rate = args.calibration_load * capacity_of(pipe, alone, policy, args.seed)
    calibration, _ = live_load(config, policy, calibration_rate, args.duration, args.seed + 1000)
    times = model_of(calibration)
    calib_s = time.perf_counter() - t0
    capacity = capacity_of(pipe, times, policy, args.seed)
    rows = []
    for share in args.loads:
        rate = share * capacity
        busy = os.getloadavg()[0]
        run, arrival_ns = live_load(config, policy, rate, args.duration, args.seed)
        lengths = lengths_of(pipe, len(arrival_ns))
        own = model_of(run)
        sims = {
            name: simulate_continuous(arrival_ns, lengths, model, policy, seed=args.seed)
            for name, model in (("sim", times), ("alone", alone), ("replay", own))
        }
        live_f = figures(run.requests, run.stages, run.units)
        sim_f = {name: figures(r.requests, r.stages, r.units) for name, r in sims.items()}
        good = [
            goodput(token_requests(r.requests, r.stages, r.units), args.ttft_ms, args.tpot_ms)
            for r in (run, sims["sim"])
        ]
        rows.append(
            {
                "load": share,
                "rate_rps": rate,
                "live": live_f,
                "sim": sim_f["sim"],
                "check": compare(sim_f["sim"], live_f),
                "alone": sim_f["alone"],
                "alone_check": compare(sim_f["alone"], live_f),
                "replay": sim_f["replay"],
                "replay_check": compare(sim_f["replay"], live_f),
                "live_step_model": own.describe(),
                "goodput_live": good[0],
                "goodput_sim": good[1],
                "failed_live": int((~run.requests["ok"]).sum()),
                "loadavg_1min": busy,
            }
        )
    grid = [capacity * s for s in np.linspace(0.1, 1.2, 12)]
    _, knee = goodput_curve(
        times,
        policy,
        lengths_of(pipe, 300),
        grid,
        ttft_ms=args.ttft_ms,
        tpot_ms=args.tpot_ms,
        target=args.target,
        seed=args.seed,
    )
    result = {
        "policy": policy.params(),
        "options": options,
        "device": args.device,
        "threads": args.threads,
        "step_model": times.describe(),
        "step_model_alone": alone.describe(),
        "calibration_rps": calibration_rate,
        "calibration_steps": len(measured),
        "calibration_s": calib_s,
        "capacity_rps": capacity,
        "rates": rows,
        "knee": knee | {"ttft_ms": args.ttft_ms, "tpot_ms": args.tpot_ms},
        "holds": all(c["within"] for r in rows for c in r["check"].values()),
        "note": args.note,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    text = markdown(result)
    if args.md:
        args.md.write_text(text)
    print(text)
    return 0 if result["holds"] else 1  # a missed goal (run_all.py)


def markdown(r: dict) -> str:
    def f(x):
        return "-" if x is None else f"{x:.3f}"

    lines = [
        f"policy {r['policy']}, options {r['options']}, {r['device']}, {r['threads']} thread(s)",
        f"step model (ns, from the calibration load at {r['calibration_rps']:.1f} req/s): "
        f"{', '.join(f'{k} {v:.0f}' for k, v in r['step_model'].items())}",
        f"steps alone (ns): {', '.join(f'{k} {v:.0f}' for k, v in r['step_model_alone'].items())}",
        f"simulated capacity {r['capacity_rps']:.1f} req/s; {r['note']}",
        "",
        "| load | rate req/s | metric | live ms | sim ms | sim/live | within | alone/live | replay/live |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in r["rates"]:
        for key, c in row["check"].items():
            lines.append(
                f"| {row['load']:.2f} | {row['rate_rps']:.1f} | {key[:-3]} | {f(row['live'][key])} | "
                f"{f(row['sim'][key])} | {f(c['ratio'])} | {'yes' if c['within'] else 'NO'} | "
                f"{f(row['alone_check'][key]['ratio'])} | {f(row['replay_check'][key]['ratio'])} |"
            )
    lines.append("")
    for row in r["rates"]:
        lines.append(
            f"load {row['load']:.2f}: {row['live']['requests']} requests live ({row['failed_live']} "
            f"failed), goodput live {f(row['goodput_live'])}, simulated {f(row['goodput_sim'])}; "
            f"1-minute load average {row['loadavg_1min']:.1f} on {os.cpu_count()} cores at its start"
        )
    k = r["knee"]
    lines.append(
        f"goodput (TTFT <= {k['ttft_ms']:g} ms, TPOT <= {k['tpot_ms']:g} ms) falls below "
        f"{k['target']:g} between {f(k['last_good_rps'])} and {f(k['first_short_rps'])} req/s "
        "(simulated)"
    )
    lines.append(f"check {'holds' if r['holds'] else 'does NOT hold'} at all three rates")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
