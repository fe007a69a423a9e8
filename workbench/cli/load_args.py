"""What ``load``, ``load --url`` and ``simulate`` share: the batcher's options, the arrival process, the summary keys.

Both :mod:`workbench.cli.batching` (in-process load, simulate) and
:mod:`workbench.cli.load_http` (served load) import from here; neither imports
the other's private names, so the two modules form no import cycle.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ConfigError

ARRIVAL_HELP = "poisson (default), bursty (on/off), or FILE.csv of arrival timestamps to replay"
SUMMARY_KEYS = ("end_to_end", "queue_wait", "batch_wait", "service", "throughput_rps", "mean_batch_size")


def add_batcher_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rate", type=float, help="mean arrival rate, requests/s (not used when replaying a file)")
    p.add_argument("--max-batch-size", type=int, default=8, help="largest batch (default 8)")
    p.add_argument("--max-wait-ms", type=float, default=5.0,
                   help="dispatch once the oldest queued request has waited this long (default 5; 0: at once)")
    p.add_argument("--concurrency", type=int, default=1, help="batches executed at once (default 1)")
    p.add_argument("--arrivals", default="poisson", metavar="PROCESS", help=ARRIVAL_HELP)
    p.add_argument("--burst-on-ms", type=float, default=50.0, help="bursty: length of an on window (default 50)")
    p.add_argument("--burst-off-ms", type=float, default=150.0, help="bursty: length of an off window (default 150)")
    p.add_argument("--seed", type=int, default=0, help="seed of the arrival process and service draws (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def arrivals_from_args(args, count, duration):
    from ..batching.arrivals import Arrivals

    if args.arrivals in ("poisson", "bursty"):
        if args.rate is None:
            raise ConfigError(f"--rate is required with --arrivals {args.arrivals}")
        return Arrivals(args.arrivals, rate_rps=args.rate, count=count, duration_s=duration, seed=args.seed,
                        on_ms=args.burst_on_ms, off_ms=args.burst_off_ms)
    if not args.arrivals.endswith(".csv") and not Path(args.arrivals).is_file():
        raise ConfigError(f"--arrivals must be poisson, bursty or a CSV file, got {args.arrivals!r}")
    return Arrivals("replay", count=count, duration_s=duration, path=args.arrivals)


def policy_from_args(args):
    from ..batching.policy import BatchPolicy

    return BatchPolicy(args.max_batch_size, args.max_wait_ms, args.concurrency)


def summary_extra(summary: dict) -> dict:
    return {k: summary[k] for k in ("utilization", "batch_sizes", "requests", "failed", "batches")}


def describe_load(arrivals, policy) -> str:
    a = arrivals.params()
    rate = f"{a['rate_rps']:g} req/s " if "rate_rps" in a else ""
    return (f"{a['process']} {rate}max_batch_size={policy.max_batch_size} max_wait_ms={policy.max_wait_ms:g} "
            f"concurrency={policy.concurrency}")
