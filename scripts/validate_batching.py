"""Validate the batching simulator against live load runs on this machine (CPU).

    python scripts/validate_batching.py [--examples text tabular] [--duration 8] [--out benchmarks/results]

For each example: profile it at several batch sizes (the service model), then
for each configuration (max_batch_size, max_wait_ms, arrival process, load as
a fraction of the model's capacity) run live load for ``--duration`` seconds
and simulate the same arrival schedule from the profiled model (pooled over
``--sim-replications`` service-draw seeds, so the prediction is not one noisy
draw). Writes ``batching_validation.md`` and ``.json``: simulated vs live p50
and p99 of end to end, relative error, and pass/miss against the goals
(15 % on p50, 25 % on p99).

The served validation (``workbench serve`` and ``workbench load --url`` in two
more processes) is research: ``research/served/validate_served.py`` writes the
"Served" section of the same file, which this script keeps.

Both the profiler and the live runs use ``--threads`` torch intra-op threads
(default 1: on a 2-core machine, two intra-op threads fight the generator and
batcher threads for the cores). Run folders go to a temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.batching.arrivals import Arrivals  # noqa: E402
from workbench.batching.policy import BatchPolicy  # noqa: E402
from workbench.batching.service_model import service_model_from_runs  # noqa: E402
from workbench.batching.simulator import simulate  # noqa: E402
from workbench.batching.summary import load_summary  # noqa: E402

GOALS = {"p50": 0.15, "p99": 0.25}
SERVED_HEADING = (
    "\n## Served"  # research/served/validate_served.py's section of batching_validation.md
)
# (max_batch_size, max_wait_ms, process, load = rate / capacity at max_batch_size)
CONFIGS = [
    (1, 0.0, "poisson", 0.3),
    (1, 0.0, "poisson", 0.6),
    (8, 2.0, "poisson", 0.2),
    (8, 2.0, "poisson", 0.5),
    (8, 5.0, "bursty", 0.4),
    (16, 5.0, "poisson", 0.6),
    (16, 2.0, "poisson", 0.85),
]


def profile_sizes(example: str, sizes: list[int], requests: int, root: Path) -> list[Path]:
    from workbench import PipelineConfig, profile

    paths = []
    for b in sizes:
        run = profile(example, PipelineConfig(batch_size=b), requests=requests, warmup=10, traced=0)
        paths.append(run.save(root / f"bs{b}"))
    return paths


def simulate_requests(
    model, schedule: np.ndarray, policy: BatchPolicy, replications: int, draws="independent"
) -> pd.DataFrame:
    """The requests tables of ``replications`` simulations of the same arrivals with different
    service draws (seeds 0, 1, ...; ``draws`` as ``simulate``'s), concatenated; each draw's
    batches numbered apart."""
    tables = [
        simulate(model, schedule, policy, seed=s, draws=draws).requests.assign(
            batch=lambda d, s=s: d["batch"] + s * 10**9
        )
        for s in range(replications)
    ]
    return pd.concat(tables, ignore_index=True)


def simulate_pooled(model, schedule: np.ndarray, policy: BatchPolicy, replications: int) -> dict:
    """Summary over ``replications`` simulations of the same arrivals with different service draws."""
    return load_summary(
        simulate_requests(model, schedule, policy, replications), policy.concurrency
    )


def threaded_model(example: str, profiled, sizes: list[int], batches: int, root: Path):
    """Service times measured under the live run's threading: per size b, a load run whose batches are all
    of size b (max wait 10 s, so only the size rule closes them) at half the profiled capacity, so the
    generator submits while the executor works, as in the validated runs. Sizes never seen keep their
    profiled times."""
    from workbench.batching.live import run_load
    from workbench.batching.service_model import ServiceModel

    runs = []
    for b in sizes:
        rate = round(0.5 * b * 1e9 / profiled.mean_ns(b), 1)
        arrivals = Arrivals("poisson", rate_rps=rate, count=batches * b, seed=100 + b)
        runs.append(
            run_load(
                example, arrivals=arrivals, policy=BatchPolicy(b, 10_000.0), drain_timeout_s=120.0
            ).save(root / f"threaded-bs{b}")
        )  # 120 s: warm-up on a busy machine is slow
    measured = service_model_from_runs(runs, min_batches=max(1, batches // 2))
    return ServiceModel.from_samples({**profiled.samples, **measured.samples}, pipeline=example)


def oracle_model(run, profiled):
    """Diagnostic only: the live run's own per-batch service times (what the queueing model gets right
    when it knows the service times exactly); sizes it never formed keep their profiled times."""
    from workbench.batching.service_model import ServiceModel

    live = service_model_from_runs([run], min_batches=1)
    return ServiceModel.from_samples({**profiled.samples, **live.samples}, pipeline=live.pipeline)


def one_config(example: str, profiled, threaded, cfg: tuple, args, root: Path) -> dict:
    from workbench.batching.live import run_load

    size, wait, process, load = cfg
    policy = BatchPolicy(size, wait)
    capacity = profiled.capacity_rps(size)
    arrivals = Arrivals(
        process, rate_rps=round(load * capacity, 1), duration_s=args.duration, seed=args.seed
    )
    tag = f"{example}-mb{size}-w{wait:g}-{process}-{load:g}"
    live = run_load(
        example,
        arrivals=arrivals,
        policy=policy,
        switch_interval_s=args.switch_interval,
        drain_timeout_s=120.0,
    )
    live.save(root / f"load-{tag}")
    models = {"profile": profiled, "threaded": threaded, "oracle": oracle_model(live, profiled)}
    replications = args.sim_replications
    lv = load_summary(live.requests, policy.concurrency)
    row = {
        "example": example,
        "max_batch_size": size,
        "max_wait_ms": wait,
        "arrivals": process,
        "load": load,
        "rate_rps": arrivals.rate_rps,
        "capacity_rps": capacity,
        "requests": lv["requests"],
        "generator_lag_ms": live.meta.load.generator_lag_ms,
        "late_requests": live.meta.load.late_requests,
        "failed": lv["failed"],
        "live_batch": lv["mean_batch_size"],
        "live_service_p50_ms": lv["service"]["p50_ms"],
        "live_service_mean_ms": lv["service"]["mean_ms"],
        "live_queue_wait_p99_ms": lv["queue_wait"]["p99_ms"],
    }
    for q in ("p50", "p99"):
        row[f"live_{q}_ms"] = lv["end_to_end"][f"{q}_ms"]
    for name, model in models.items():
        sm = simulate_pooled(model, arrivals.times_ns(), policy, replications)
        row[f"{name}_batch"] = sm["mean_batch_size"]
        row[f"{name}_service_mean_ms"] = sm["service"]["mean_ms"]
        for q in ("p50", "p99"):
            s, v = sm["end_to_end"][f"{q}_ms"], lv["end_to_end"][f"{q}_ms"]
            row |= {
                f"{name}_{q}_ms": s,
                f"{name}_err_{q}": (s - v) / v,
                f"{name}_pass_{q}": abs(s - v) / v <= GOALS[q],
            }
    return row


MODELS = {"profile": "sim", "threaded": "threaded", "oracle": "oracle"}


def markdown(rows: list[dict], info: dict) -> str:
    head = (
        "| example | max batch | max wait ms | arrivals | load | rate req/s | n | live p50 | sim p50 | err | threaded | "
        "err | oracle | err | live p99 | sim p99 | err | threaded | err | oracle | err | batch live/sim | gen lag ms |"
    )
    passed = "; ".join(
        f"{label}: p50 {info[f'{name}_pass_p50']}, p99 {info[f'{name}_pass_p99']}"
        for name, label in MODELS.items()
    )
    lines = [
        "# Batching simulator vs live load (CPU)",
        "",
        f"Machine: {info['cpu']} ({info['cores']} cores, load average when it started: "
        f"{info['loadavg']}), torch threads {info['threads']}, {info['duration_s']:g} s per live run. Each "
        f"simulation runs on the live run's arrival schedule, pooled over {info['replications']} service-draw "
        "seeds. End-to-end latency, ms; error = (simulated - live) / live.",
        "",
        "- **sim**: the prediction. Service model from `workbench profile` runs at batch sizes "
        + ", ".join(map(str, info["sizes"]))
        + f" ({info['profile_requests']} requests each), made once per example "
        "before its live runs.",
        f"- **threaded**: service times measured under the live run's threading instead: per batch size, a load "
        f"run of {info['threaded_batches']} batches all of that size at half its profiled capacity (the "
        "generator submits while the executor works, as in the validated runs), made once per example.",
        "- **oracle** (diagnostic, not a prediction): the live run's own per-batch service times as the "
        "service model. What is left is the error of the queueing model itself (dispatch rule, thread "
        "wake-ups, the generator's lag).",
        "",
        f"Goals: |error| <= 15 % on p50, <= 25 % on p99. Passed — {passed}. "
        f"Produced by `python scripts/validate_batching.py` in {info['elapsed_s']:.0f} s.",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]

    def cell(r, name, q):
        mark = "" if r[f"{name}_pass_{q}"] else " **miss**"
        return f"{r[f'{name}_{q}_ms']:.2f} | {r[f'{name}_err_{q}'] * 100:+.0f} %{mark}"

    for r in rows:
        p50 = " | ".join(cell(r, name, "p50") for name in MODELS)
        p99 = " | ".join(cell(r, name, "p99") for name in MODELS)
        lines.append(
            f"| {r['example']} | {r['max_batch_size']} | {r['max_wait_ms']:g} | {r['arrivals']} | {r['load']:.2f} | "
            f"{r['rate_rps']:.0f} | {r['requests']} | {r['live_p50_ms']:.2f} | {p50} | {r['live_p99_ms']:.2f} | "
            f"{p99} | {r['live_batch']:.2f}/{r['profile_batch']:.2f} | {r['generator_lag_ms']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", nargs="+", default=["text", "tabular"])
    ap.add_argument("--sizes", nargs="+", type=int, default=[1, 2, 4, 8, 16])
    ap.add_argument("--profile-requests", type=int, default=200)
    ap.add_argument(
        "--threaded-batches",
        type=int,
        default=120,
        help="batches per size of the threaded calibration",
    )
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--sim-replications", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--switch-interval", type=float, default=None, help="sys.setswitchinterval for live runs"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--configs", type=int, default=len(CONFIGS), help="use the first N configurations"
    )
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    )
    ap.add_argument(
        "--work",
        type=Path,
        help="keep every run folder here (default: a temporary folder, removed)",
    )
    args = ap.parse_args(argv)
    import torch

    from workbench.device import cpu_model

    torch.set_num_threads(args.threads)
    t0, rows = time.perf_counter(), []
    with (
        contextlib.nullcontext(str(args.work))
        if args.work
        else tempfile.TemporaryDirectory(prefix="wb-batching-validation-")
    ) as tmp:
        root = Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for example in args.examples:
            profiled = service_model_from_runs(
                profile_sizes(example, args.sizes, args.profile_requests, root / example)
            )
            threaded = threaded_model(
                example, profiled, args.sizes, args.threaded_batches, root / example
            )
            for cfg in CONFIGS[: args.configs]:
                row = one_config(example, profiled, threaded, cfg, args, root)
                rows.append(row)
                print(
                    f"{example:<8} mb={cfg[0]:<3} w={cfg[1]:<4g} {cfg[2]:<8} load={cfg[3]:<5g} "
                    + "  ".join(
                        f"{q} live {row[f'live_{q}_ms']:7.2f} "
                        + " ".join(
                            f"{label} {row[f'{name}_err_{q}'] * 100:+6.1f}%"
                            for name, label in MODELS.items()
                        )
                        for q in ("p50", "p99")
                    )
                    + f"  batch {row['live_batch']:.2f}/{row['profile_batch']:.2f} lag {row['generator_lag_ms']:.2f} ms",
                    flush=True,
                )
    info = {
        "cpu": cpu_model(),
        "cores": len(os.sched_getaffinity(0)),
        "threads": args.threads,
        "duration_s": args.duration,
        "replications": args.sim_replications,
        "python": platform.python_version(),
        "switch_interval_s": args.switch_interval or sys.getswitchinterval(),
        "sizes": args.sizes,
        "profile_requests": args.profile_requests,
        "threaded_batches": args.threaded_batches,
        "loadavg": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "elapsed_s": time.perf_counter() - t0,
    }
    for name in MODELS:
        for q in ("p50", "p99"):
            info[f"{name}_pass_{q}"] = f"{sum(r[f'{name}_pass_{q}'] for r in rows)}/{len(rows)}"
    args.out.mkdir(parents=True, exist_ok=True)
    md_path, json_path = args.out / "batching_validation.md", args.out / "batching_validation.json"
    text = markdown(rows, info)
    if (
        md_path.is_file() and SERVED_HEADING in md_path.read_text()
    ):  # the served section is kept as it was
        text += SERVED_HEADING + md_path.read_text().split(SERVED_HEADING, 1)[1]
    served = json.loads(json_path.read_text()).get("served", []) if json_path.is_file() else []
    md_path.write_text(text)
    json_path.write_text(
        json.dumps({"info": info, "rows": rows, "served": served}, indent=2, default=str)
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
