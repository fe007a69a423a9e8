"""The served batching validation: the simulator against ``workbench serve`` over HTTP, cell by cell (research).

    python research/served/validate_served.py [--examples text tabular] [--duration 8] [--rounds 4]
        [--work DIR] [--out benchmarks/results]

For each example: the in-process threaded service model of
``scripts/validate_batching.py`` (profiles at several batch sizes, then load
runs all of one size), then per configuration of its ``CONFIGS`` a served
cell (``research/served/validation.py``: a ``workbench serve`` child process, a
probe, calibration runs and ``--rounds`` measured segments through
``workbench load --url``). Writes the "Served" section of
``batching_validation.md`` (and ``served`` of ``batching_validation.json``)
after that file's in-process table, which it keeps. ``--work DIR`` keeps every
run folder, for ``diag_served_models.py``, ``diag_served_gaps.py`` and
``diag_served_work.py`` beside this file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from research.served.validation import served_markdown, served_row  # noqa: E402
from validate_batching import CONFIGS, GOALS, SERVED_HEADING, profile_sizes, threaded_model  # noqa: E402
from workbench.batching.service_model import service_model_from_runs  # noqa: E402

PRINTED = (
    "served_capacity_rps",
    "batcher_p50_ms",
    "batcher_p99_ms",
    "served_err_p50",
    "served_err_p99",
    "contention_err_p50",
    "contention_err_p99",
    "matched_err_p50",
    "matched_err_p99",
    "phases_err_p50",
    "phases_err_p99",
    "phase_spread",
    "per_arrival_ms",
    "per_response_ms",
)


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
    ap.add_argument(
        "--duration", type=float, default=8.0, help="seconds of measured segments per cell"
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=4,
        help="measured segments per cell, each after its calibration",
    )
    ap.add_argument("--sim-replications", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--configs", type=int, default=len(CONFIGS), help="use the first N configurations"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument(
        "--work",
        type=Path,
        help="keep every run folder here (default: a temporary folder, removed)",
    )
    args = ap.parse_args(argv)
    if args.rounds < 2:
        ap.error(f"--rounds must be 2 or more, got {args.rounds}")
    args.goals = GOALS
    import torch

    torch.set_num_threads(args.threads)
    t0, served = time.perf_counter(), []
    with (
        contextlib.nullcontext(str(args.work))
        if args.work
        else tempfile.TemporaryDirectory(prefix="wb-served-validation-")
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
                served.append(served_row(example, threaded, cfg, args, root))
                print(
                    f"served {example} {cfg}: " + json.dumps({k: served[-1][k] for k in PRINTED}),
                    flush=True,
                )
    md_path, json_path = args.out / "batching_validation.md", args.out / "batching_validation.json"
    in_process = (
        md_path.read_text().split(SERVED_HEADING)[0].rstrip("\n") + "\n"
        if md_path.is_file()
        else ""
    )
    old = json.loads(json_path.read_text()) if json_path.is_file() else {"info": {}, "rows": []}
    options = "".join(
        f" --{name} {value:g}"
        for name, value, default in (("duration", args.duration, 8.0), ("rounds", args.rounds, 4))
        if value != default
    )
    text = (
        in_process
        + served_markdown(served)
        + (
            f"\nServed section produced by `python research/served/validate_served.py{options}` in "
            f"{time.perf_counter() - t0:.0f} s, load average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}.\n"
        )
    )
    args.out.mkdir(parents=True, exist_ok=True)
    md_path.write_text(text)
    json_path.write_text(
        json.dumps(
            {"info": old["info"], "rows": old["rows"], "served": served}, indent=2, default=str
        )
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
