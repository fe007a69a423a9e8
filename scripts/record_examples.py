"""Record the example runs that notebooks, dashboards and tests explore without a GPU.

    python scripts/record_examples.py                 # CPU runs -> data/runs/ (one torch thread)
    python scripts/record_examples.py --device cuda   # GPU runs (the GPU validation script calls this)

Each run folder is named ``{example}-{device}-bs{N}-{precision}[-{variant}]`` and
is overwritten atomically; the variants are ``-pageable`` (option ``pin_memory=False``),
``-graph`` (option ``cuda_graph=True``), ``-nokv`` (the generate example's ``kv_cache=False``)
and ``-sync-request`` (``sync="request"``: one
synchronize per request, the wrong way to time asynchronous GPU stages, kept for
notebook 3). Traced runs are limited to a few requests so each file stays well
under 5 MB. The same script records CPU and GPU data.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench import PipelineConfig, profile  # noqa: E402
from workbench.errors import WorkbenchError  # noqa: E402

# (example, batch_size, precision, options, requests[, sync])
CPU_RUNS = [
    ("tabular", 1, "fp32", {}, 600),
    ("tabular", 8, "fp32", {}, 600),
    ("text", 1, "fp32", {}, 600),
    ("text", 8, "fp32", {}, 600),
    ("text", 8, "bf16", {}, 600),
    ("text", 8, "int8", {}, 600),
    ("image", 1, "fp32", {}, 600),
    ("image", 8, "fp32", {}, 300),
    # a generative pipeline (issue 41): TTFT, ITL, TPOT; without the KV cache decode steps grow
    ("generate", 1, "fp32", {}, 100),
    ("generate", 1, "fp32", {"kv_cache": False}, 100),
]
# service-time model for the batching simulator: one example at several batch sizes
CPU_SERVICE_RUNS = [("text", bs, "fp32", {}, 600) for bs in (2, 4, 16)] + [
    ("tabular", bs, "fp32", {}, 600) for bs in (2, 4, 16)
]
# the latency explorer's precision grid: text in bf16 and int8 at the batch sizes fp32 has (8 is in CPU_RUNS),
# so a room's precision toggle answers from the record before anyone measures live on the shared server
CPU_PRECISION_RUNS = [
    ("text", bs, precision, {}, 600) for precision in ("bf16", "int8") for bs in (1, 2, 4, 16)
]
CUDA_RUNS = [
    ("text", 1, "fp32", {}, 200),
    ("text", 64, "fp32", {}, 100),
    ("text", 1, "bf16", {}, 200),
    ("text", 64, "bf16", {}, 100),
    ("image", 1, "fp32", {}, 200),
    ("image", 64, "fp32", {}, 100),
    ("image", 64, "bf16", {}, 100),
    ("image", 64, "fp32", {"pin_memory": False}, 100),
    ("tabular", 8, "fp32", {}, 200),
    # notebook 4: launch-bound at batch 1, compute-bound at batch 1024, and the CUDA graph fix
    ("text", 1024, "fp32", {}, 30),
    ("text", 1, "fp32", {"cuda_graph": True}, 200),
    # notebook 3: host timers without a synchronize per stage, where the GPU runs behind the host
    ("text", 1024, "fp32", {}, 30, "request"),
    ("generate", 1, "fp32", {}, 100),
    ("generate", 1, "fp32", {"kv_cache": False}, 100),
    ("generate", 8, "bf16", {}, 100),
]


def run_name(
    example: str, device: str, bs: int, precision: str, options: dict, sync: str = "stage"
) -> str:
    variant = (
        ("-pageable" if options.get("pin_memory") is False else "")
        + ("-graph" if options.get("cuda_graph") else "")
        + ("-sync-request" if sync == "request" else "")
        + ("-nokv" if options.get("kv_cache") is False else "")
    )
    return f"{example}-{device}-bs{bs}-{precision}{variant}"


def record(
    plan,
    device: str,
    out_dir: Path,
    traced: int,
    quick: bool,
    threads: int | None = None,
    only: list[str] | None = None,
    allow_noisy: bool = False,
) -> list[str]:
    """Profile and save each run of ``plan``; a run its noise check flags is not saved unless
    ``allow_noisy`` (data/README.md promises quiet CPU runs). Returns the names saved."""
    done = []
    for example, bs, precision, options, requests, *rest in plan:
        sync = rest[0] if rest else "stage"
        name = run_name(example, device, bs, precision, options, sync)
        if only and name not in only:
            continue
        config = PipelineConfig(
            device=device, batch_size=bs, precision=precision, options=options, threads=threads
        )
        t0 = time.perf_counter()
        try:
            # Python stacks at batch 1024 would make the trace tens of MB (every tokenizer call is an event)
            run = profile(
                example,
                config,
                requests=10 if quick else requests,
                warmup=10,
                traced=traced,
                sync=sync,
                stacks=bs < 256,
            )
        except WorkbenchError as exc:
            print(f"{name:<36} skipped: {exc}")
            continue
        noise = run.meta.noise
        if noise is not None and noise.noisy and not allow_noisy:
            print(
                f"{name:<36} not saved, noisy: {'; '.join(noise.reasons)} (--allow-noisy keeps it)"
            )
            continue
        run.save(out_dir / name, overwrite=True)
        e2e = run.requests.loc[~run.requests["warmup"], "dur_ns"]
        print(
            f"{name:<36} {len(e2e):>4} requests  p50 {e2e.median() / 1e6:8.3f} ms  ({time.perf_counter() - t0:5.1f} s)"
        )
        done.append(name)
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=ROOT / "data" / "runs")
    parser.add_argument("--traced", type=int, default=3, help="requests in each traced run")
    parser.add_argument("--quick", action="store_true", help="10 requests per run (smoke test)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads (default: 1 on CPU, where the notebooks and dashboards profile live "
        "with one thread; torch's choice on CUDA)",
    )
    parser.add_argument(
        "--only", nargs="*", metavar="NAME", help="record only these runs (folder names)"
    )
    parser.add_argument(
        "--allow-noisy",
        action="store_true",
        help="save a run even when its noise check flags it (by default it is not saved)",
    )
    args = parser.parse_args()
    cuda = args.device.startswith("cuda")
    plan = CUDA_RUNS if cuda else CPU_RUNS + CPU_SERVICE_RUNS + CPU_PRECISION_RUNS
    threads = args.threads if args.threads is not None else (None if cuda else 1)
    done = record(
        plan,
        args.device.split(":")[0],
        args.out,
        args.traced,
        args.quick,
        threads,
        args.only,
        args.allow_noisy,
    )
    missing = sorted(set(args.only or ()) - set(done))
    if missing:
        print(
            f"not recorded: {', '.join(missing)} (no such run in the plan, or skipped above)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
