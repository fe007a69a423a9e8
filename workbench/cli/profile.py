"""``workbench profile``: measure a pipeline and write a run folder."""
from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

from ..config import PRECISIONS, PipelineConfig
from ..errors import ConfigError
from ..timing import SYNC_POLICIES
from .show import print_budget


def register(subparsers) -> None:
    p = subparsers.add_parser("profile", help="profile a pipeline stage by stage and write a run folder",
                              description="Profile a pipeline: a timing run (percentiles) and a traced run (torch.profiler).")
    add_pipeline_arguments(p)
    p.add_argument("--requests", type=int, default=200, help="measured requests (pipeline calls), default 200")
    p.add_argument("--warmup", type=int, default=10, help="warm-up requests reported apart, default 10")
    p.add_argument("--traced", type=int, default=5, help="requests in the separate traced run (0: no trace), default 5")
    p.add_argument("--sync", choices=SYNC_POLICIES, default="stage", help="CUDA synchronization policy (see docs)")
    p.add_argument("--out", type=Path, help="run folder to write (default runs/NAME-DEVICE-bsN-PRECISION-TIME)")
    p.add_argument("--json", action="store_true", help="print the budget as one JSON object")
    p.set_defaults(func=run)


def add_pipeline_arguments(p: argparse.ArgumentParser, default_batch_size: int = 1) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--example", help="a shipped example: tabular, text or image")
    src.add_argument("--pipeline", help="your factory: MODULE:FUNCTION or path/to/file.py:FUNCTION")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default cpu)")
    p.add_argument("--batch-size", type=int, default=default_batch_size, help="items per pipeline call")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS)
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a free option for the factory (value parsed as JSON when it can be); repeatable")
    p.add_argument("--threads", type=int, help="torch CPU threads for the run (default: torch's own choice); "
                   "measure with the thread count your server uses")


def apply_threads(args) -> None:
    """Set torch's intra-op thread count when --threads was given (recorded in run.json's env)."""
    if args.threads is None:
        return
    if args.threads < 1:
        raise ConfigError(f"--threads must be >= 1, got {args.threads}")
    from ..device import require_torch

    require_torch().set_num_threads(args.threads)


def config_from_args(args) -> PipelineConfig:
    return PipelineConfig(device=args.device, batch_size=args.batch_size, precision=args.precision,
                          options=parse_options(args.option))


def parse_options(pairs: list[str]) -> dict:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {pair!r}: expected KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options


def factory_from_args(args):
    if args.example:
        from ..examples import factory

        return factory(args.example)
    from ..pipeline import load_factory

    return load_factory(args.pipeline)


def default_out(args) -> Path:
    name = args.example or Path(args.pipeline.split(":")[0]).stem
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{name}-{args.device.replace(':', '')}-bs{args.batch_size}-{args.precision}-{stamp}"


def run(args) -> int:
    from ..analysis.budget import budget
    from ..runner import profile

    config = config_from_args(args)
    apply_threads(args)
    factory = factory_from_args(args)
    out = args.out or default_out(args)
    if out.exists():
        raise ConfigError(f"--out {out} already exists; pick another folder")
    result = profile(factory, config, requests=args.requests, warmup=args.warmup, traced=args.traced, sync=args.sync)
    path = result.save(out)
    report = budget(result.meta, result.requests, result.stages)
    if args.json:
        print(json.dumps(report | {"run_dir": str(path)}))
    else:
        print_budget(report, sys.stdout)
        print(f"\nrun written to {path}")
    return 0
