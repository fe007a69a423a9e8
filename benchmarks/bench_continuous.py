"""Does the continuous batching simulator predict a live run? The generate example at three rates.

    python benchmarks/bench_continuous.py [--duration 5] [--loads 0.3 0.6 0.85] [--repeats 5]
                                          [--json PATH] [--md PATH]

Exit 1 when the check does not hold (a missed goal, as ``run_all.py`` counts them).

1. Capacity: time the example's step API alone (``continuous_live.profile_steps``: prefills of
   several prompt lengths, decodes of 1..max_num_seqs sequences at several contexts) and fit the
   step model (``continuous.fit_step_times``): *alone*. Then one live ``load`` at
   ``--calibration-load`` of alone's capacity (arrival seed ``--seed`` + 1000): its steps, timed
   inside the serving loop (the line, each step's residual ``noise_ns``, the loop's time between
   steps ``between_ns``), give *one-rate*. The simulator's capacity with one-rate (requests/s at a
   rate far past it) sets the three rates, as shares of it, and the goodput knee.
2. ``--repeats K`` rounds; round r runs every rate, forward in even rounds and backward in odd ones
   (0.3 0.6 0.85, then 0.85 0.6 0.3, ...), so a drift of the machine over the run does not land on
   one rate. At each rate, first a calibration live ``load`` at that same rate on arrival seed
   ``--seed`` + 1000 + r, whose steps give *sim* (the server's view of a step at that rate, as
   ``simulate --service LIVE`` takes a live run's requests), then the checked live ``load`` on
   arrival seed ``--seed`` + r (so no checked run shares its arrivals with a calibration). Why per
   rate: a loop that sleeps between arrivals steps slower at low load (0.84 ms ITL p50 at 0.3
   against 0.75 at 0.6, quiet, results/continuous.md): one rate's model does not carry to another.
3. The simulator runs on each checked run's own arrivals and request lengths (noise seed
   ``--seed`` + r) with each model: *sim*, *one-rate*, *alone* and *replay* (the model fitted to
   the checked run's own steps, ``load.continuous.step_model``; replay against live is the
   scheduling model's error, sim against replay the calibration's).
4. The verdict is pooled per rate: the K live runs' per-request TTFTs and per-gap ITLs
   (``analysis.tokens.token_requests`` and ``unit_gaps``) concatenated, and likewise the K
   simulated runs of each model; p50 and p99 of each pooled sample, simulated over live. Why
   pooled: one run's p99 is its 4th or 5th slowest request, one burst of arrivals decides it.
   The check holds when every pooled p50 of *sim* is within 15 % and every p99 within 25 %; beside
   each pooled ratio the range of the K per-round ratios. Goodput (TTFT and TPOT bounds) pooled
   the same way; the simulator's rate where goodput falls below the target is one-rate's.

The check is meant for a quiet machine; on a busy one the live steps are slower and noisier than
the calibration's (say so beside the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.analysis.stats import summarize_ns  # noqa: E402
from workbench.analysis.tokens import token_requests, unit_gaps  # noqa: E402
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
CALIBRATION_SEED = 1000  # added to --seed (and the round) for a calibration load's arrivals
KEYS = ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms")
MODELS = ("sim", "one_rate", "alone", "replay")  # simulated columns; the verdict is sim's
CHECKS = {"sim": "check"} | {name: f"{name}_check" for name in MODELS[1:]}  # JSON keys


class Sample(NamedTuple):
    """What a run (live or simulated) is judged on: ``per`` (``token_requests`` rows: TTFT, TPOT)
    and ``gaps`` (``unit_gaps`` rows: ITL)."""

    per: pd.DataFrame
    gaps: pd.DataFrame


def sample_of(run) -> Sample:
    return Sample(
        token_requests(run.requests, run.stages, run.units), unit_gaps(run.requests, run.units)
    )


def figures(samples: Sequence[Sample]) -> dict:
    """TTFT and ITL p50/p99 (ms) of the samples pooled: every request's TTFT and every gap's ITL
    concatenated; ``requests`` and ``gaps`` behind them."""
    ttft = summarize_ns(np.concatenate([s.per["ttft_ns"].to_numpy("int64") for s in samples]))
    itl = summarize_ns(np.concatenate([s.gaps["itl_ns"].to_numpy("int64") for s in samples]))
    return {
        "ttft_p50_ms": ttft["p50_ms"],
        "ttft_p99_ms": ttft["p99_ms"],
        "itl_p50_ms": itl["p50_ms"],
        "itl_p99_ms": itl["p99_ms"],
        "requests": ttft["count"],
        "gaps": itl["count"],
    }


def compare(sim: dict, live: dict) -> dict:
    """Per metric of :data:`KEYS`: ``ratio`` sim/live (None without both), ``within`` the goal."""
    out = {}
    for key in KEYS:
        ratio = sim[key] / live[key] if sim[key] is not None and live[key] else None
        tol = P50_TOL if "p50" in key else P99_TOL
        out[key] = {"ratio": ratio, "within": ratio is not None and abs(ratio - 1) <= tol}
    return out


def judged(samples: dict) -> dict:
    """``live`` and each of :data:`MODELS`: the :func:`figures` of its list of samples, pooled,
    and (under :data:`CHECKS`) the model's :func:`compare` with live."""
    out = {"live": figures(samples["live"])}
    for name in MODELS:
        out[name] = figures(samples[name])
        out[CHECKS[name]] = compare(out[name], out["live"])
    return out


def pooled_goodput(samples: Sequence[Sample], ttft_ms: float, tpot_ms: float) -> float | None:
    return goodput(pd.concat([s.per for s in samples], ignore_index=True), ttft_ms, tpot_ms)


def pooled_row(load: float, rate: float, samples: dict, rounds: Sequence[dict], bounds) -> dict:
    """One rate's verdict over its rounds: ``samples`` holds the K :class:`Sample` of ``live`` and
    of each of :data:`MODELS`; ``rounds`` the per-round rows (their ``check``, for ``spread``: the
    min and max of the per-round sim/live ratios); ``bounds`` goodput's (TTFT ms, TPOT ms)."""
    row = {"load": load, "rate_rps": rate, "rounds": len(samples["live"])} | judged(samples)
    row["spread"] = {}
    for key in KEYS:
        ratios = [r["check"][key]["ratio"] for r in rounds if r["check"][key]["ratio"] is not None]
        row["spread"][key] = [min(ratios), max(ratios)] if ratios else None
    row["goodput_live"] = pooled_goodput(samples["live"], *bounds)
    row["goodput_sim"] = pooled_goodput(samples["sim"], *bounds)
    return row


def round_orders(n_loads: int, repeats: int) -> list[list[int]]:
    """The loads' indices each round runs, forward in even rounds and backward in odd ones."""
    forward = list(range(n_loads))
    return [forward if r % 2 == 0 else forward[::-1] for r in range(repeats)]


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


def check_rate(setup, load: float, rate: float, rnd: int, fixed: dict, args):
    """One round at one rate: the calibration load, the checked load, the simulator on the checked
    run's arrivals with each model (``fixed``: one-rate and alone). ``(row, samples by name)``."""
    config, pipe, policy = setup
    calibration, _ = live_load(
        config, policy, rate, args.duration, args.seed + CALIBRATION_SEED + rnd
    )
    busy = os.getloadavg()[0]
    run, arrival_ns = live_load(config, policy, rate, args.duration, args.seed + rnd)
    lengths = lengths_of(pipe, len(arrival_ns))
    models = {"sim": model_of(calibration), **fixed, "replay": model_of(run)}
    samples = {"live": sample_of(run)}
    for name in MODELS:
        sim = simulate_continuous(arrival_ns, lengths, models[name], policy, seed=args.seed + rnd)
        samples[name] = sample_of(sim)
    bounds = (args.ttft_ms, args.tpot_ms)
    row = {"round": rnd, "load": load, "rate_rps": rate}
    row |= judged({name: [one] for name, one in samples.items()}) | {
        "sim_step_model": models["sim"].describe(),
        "live_step_model": models["replay"].describe(),
        "goodput_live": goodput(samples["live"].per, *bounds),
        "goodput_sim": goodput(samples["sim"].per, *bounds),
        "failed_live": int((~run.requests["ok"]).sum()),
        "loadavg_1min": busy,
    }
    return row, samples


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5.0, help="seconds of arrivals per load")
    ap.add_argument("--loads", type=float, nargs=3, default=[0.3, 0.6, 0.85])
    ap.add_argument("--repeats", type=int, default=5, help="rounds over the loads, pooled")
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
    if not 1 <= args.repeats <= CALIBRATION_SEED:
        ap.error(f"--repeats must be 1..{CALIBRATION_SEED}, got {args.repeats}")

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
    calibration, _ = live_load(
        config, policy, calibration_rate, args.duration, args.seed + CALIBRATION_SEED
    )
    one_rate = model_of(calibration)
    calib_s = time.perf_counter() - t0
    capacity = capacity_of(pipe, one_rate, policy, args.seed)
    rates = [share * capacity for share in args.loads]
    fixed = {"one_rate": one_rate, "alone": alone}
    rows, kept, by_rate = [], [{} for _ in args.loads], [[] for _ in args.loads]
    for rnd, order in enumerate(round_orders(len(args.loads), args.repeats)):
        for i in order:
            row, samples = check_rate(
                (config, pipe, policy), args.loads[i], rates[i], rnd, fixed, args
            )
            rows.append(row)
            by_rate[i].append(row)
            for name, sample in samples.items():
                kept[i].setdefault(name, []).append(sample)
    bounds = (args.ttft_ms, args.tpot_ms)
    pooled = [
        pooled_row(share, rate, kept[i], by_rate[i], bounds)
        for i, (share, rate) in enumerate(zip(args.loads, rates))
    ]
    grid = [capacity * s for s in np.linspace(0.1, 1.2, 12)]
    _, knee = goodput_curve(
        one_rate,
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
        "repeats": args.repeats,
        "step_model": one_rate.describe(),
        "step_model_alone": alone.describe(),
        "calibration_rps": calibration_rate,
        "calibration_steps": len(measured),
        "calibration_s": calib_s,
        "capacity_rps": capacity,
        "pooled": pooled,
        "rates": rows,
        "knee": knee | {"ttft_ms": args.ttft_ms, "tpot_ms": args.tpot_ms},
        "holds": all(c["within"] for r in pooled for c in r["check"].values()),
        "note": args.note,
        "wall_s": time.perf_counter() - t0,
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

    def spread(pair):
        return "-" if pair is None else f"{pair[0]:.3f}..{pair[1]:.3f}"

    def ratios(row, key):
        return " | ".join(f(row[CHECKS[name]][key]["ratio"]) for name in MODELS[1:])

    rounds = r["repeats"]
    lines = [
        f"policy {r['policy']}, options {r['options']}, {r['device']}, {r['threads']} thread(s)",
        f"one-rate step model (ns, from the calibration load at {r['calibration_rps']:.1f} req/s): "
        f"{', '.join(f'{k} {v:.0f}' for k, v in r['step_model'].items())}",
        f"steps alone (ns): {', '.join(f'{k} {v:.0f}' for k, v in r['step_model_alone'].items())}",
        f"simulated capacity {r['capacity_rps']:.1f} req/s (one-rate); {r['note']}",
        "",
        f"Pooled over {rounds} round(s), sim calibrated at each rate; per round: sim/live min..max",
        "",
        "| load | rate req/s | metric | live ms | sim ms | sim/live | within | per round "
        "| one-rate/live | alone/live | replay/live |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in r["pooled"]:
        for key, c in row["check"].items():
            lines.append(
                f"| {row['load']:.2f} | {row['rate_rps']:.1f} | {key[:-3]} | {f(row['live'][key])} | "
                f"{f(row['sim'][key])} | {f(c['ratio'])} | {'yes' if c['within'] else 'NO'} | "
                f"{spread(row['spread'][key])} | {ratios(row, key)} |"
            )
    lines.append("")
    for row in r["pooled"]:
        lines.append(
            f"load {row['load']:.2f}: {row['live']['requests']} requests and {row['live']['gaps']} "
            f"gaps live over {row['rounds']} round(s), goodput live {f(row['goodput_live'])}, "
            f"simulated {f(row['goodput_sim'])}"
        )
    lines += [
        "",
        "Per round (in the order run)",
        "",
        "| round | load | rate req/s | metric | live ms | sim ms | sim/live | within "
        "| one-rate/live | alone/live | replay/live |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in r["rates"]:
        for key, c in row["check"].items():
            lines.append(
                f"| {row['round']} | {row['load']:.2f} | {row['rate_rps']:.1f} | {key[:-3]} | "
                f"{f(row['live'][key])} | {f(row['sim'][key])} | {f(c['ratio'])} | "
                f"{'yes' if c['within'] else 'NO'} | {ratios(row, key)} |"
            )
    lines.append("")
    for row in r["rates"]:
        lines.append(
            f"round {row['round']} load {row['load']:.2f}: {row['live']['requests']} requests live "
            f"({row['failed_live']} failed), goodput live {f(row['goodput_live'])}, simulated "
            f"{f(row['goodput_sim'])}; 1-minute load average {row['loadavg_1min']:.1f} on "
            f"{os.cpu_count()} cores at its start"
        )
    knee = r["knee"]
    lines.append(
        f"goodput (TTFT <= {knee['ttft_ms']:g} ms, TPOT <= {knee['tpot_ms']:g} ms) falls below "
        f"{knee['target']:g} between {f(knee['last_good_rps'])} and {f(knee['first_short_rps'])} "
        "req/s (simulated, one-rate)"
    )
    lines.append(
        f"check {'holds' if r['holds'] else 'does NOT hold'} at all three rates "
        f"(pooled, {rounds} rounds)"
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
