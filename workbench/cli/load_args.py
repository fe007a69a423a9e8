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
SUMMARY_KEYS = (
    "end_to_end",
    "queue_wait",
    "batch_wait",
    "service",
    "throughput_rps",
    "mean_batch_size",
)


def add_batcher_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rate", type=float, help="mean arrival rate, requests/s (not used when replaying a file)"
    )
    p.add_argument("--max-batch-size", type=int, default=8, help="largest batch (default 8)")
    p.add_argument(
        "--max-wait-ms",
        type=float,
        default=5.0,
        help="dispatch once the oldest queued request has waited this long (default 5; 0: at once)",
    )
    p.add_argument(
        "--concurrency", type=int, default=1, help="batches executed at once (default 1)"
    )
    p.add_argument("--arrivals", default="poisson", metavar="PROCESS", help=ARRIVAL_HELP)
    p.add_argument(
        "--burst-on-ms",
        type=float,
        default=50.0,
        help="bursty: length of an on window (default 50)",
    )
    p.add_argument(
        "--burst-off-ms",
        type=float,
        default=150.0,
        help="bursty: length of an off window (default 150)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the arrival process and service draws (default 0)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def arrivals_from_args(args, count, duration):
    from ..batching.arrivals import Arrivals

    if args.arrivals in ("poisson", "bursty"):
        if args.rate is None:
            raise ConfigError(f"--rate is required with --arrivals {args.arrivals}")
        return Arrivals(
            args.arrivals,
            rate_rps=args.rate,
            count=count,
            duration_s=duration,
            seed=args.seed,
            on_ms=args.burst_on_ms,
            off_ms=args.burst_off_ms,
        )
    if not args.arrivals.endswith(".csv") and not Path(args.arrivals).is_file():
        raise ConfigError(
            f"--arrivals must be poisson, bursty or a CSV file, got {args.arrivals!r}"
        )
    return Arrivals("replay", count=count, duration_s=duration, path=args.arrivals)


def policy_from_args(args):
    from ..batching.policy import BatchPolicy

    return BatchPolicy(args.max_batch_size, args.max_wait_ms, args.concurrency)


def summary_extra(summary: dict) -> dict:
    return {k: summary[k] for k in ("utilization", "batch_sizes", "requests", "failed", "batches")}


def describe_load(arrivals, policy) -> str:
    a = arrivals.params()
    rate = f"{a['rate_rps']:g} req/s " if "rate_rps" in a else ""
    return (
        f"{a['process']} {rate}max_batch_size={policy.max_batch_size} max_wait_ms={policy.max_wait_ms:g} "
        f"concurrency={policy.concurrency}"
    )


def add_engine_arguments(load: argparse.ArgumentParser) -> None:
    """``--engine``, ``--workers``, ``--expect-workers``, ``--master-host``, ``--master-port`` (``load --url``)."""
    g = load.add_argument_group("load generator of --url (--engine)")
    g.add_argument(
        "--engine",
        choices=("workbench", "locust"),
        default="workbench",
        help="workbench (default: this process's own generator, one machine) or locust (Locust's master "
        "and --workers processes, headless; more workers on other machines with --expect-workers)",
    )
    g.add_argument(
        "--workers",
        type=int,
        default=1,
        help="--engine locust: worker processes started here (default 1)",
    )
    g.add_argument(
        "--expect-workers",
        type=int,
        help="--engine locust: workers to wait for, those started here included (default --workers); "
        "start the others with: python -m workbench locust-worker --master HOST",
    )
    g.add_argument(
        "--master-host",
        default="127.0.0.1",
        help="--engine locust: the address the master listens on (0.0.0.0 for workers on other machines)",
    )
    g.add_argument(
        "--master-port", type=int, default=0, help="--engine locust: its port (default: a free one)"
    )


def engine_from_args(args):
    """The ``driver`` of :func:`workbench.serving.loadrun.run_http_load` (None: the workbench's own generator)."""
    if args.engine == "workbench":
        if args.expect_workers is not None or args.workers != 1:
            raise ConfigError("--workers/--expect-workers are for --engine locust")
        return None
    if not args.url:
        raise ConfigError("--engine locust sends to a server: give --url")
    from ..serving.locust_drive import LocustEngine, locust_available

    locust_available()
    return LocustEngine(args.workers, args.expect_workers, args.master_host, args.master_port)


def http_load(args, payloads: list[bytes], arrivals):
    """One served load run with the engine ``args`` name (``load --url``, and each point of a served sweep)."""
    from ..serving.loadrun import run_http_load

    engine = engine_from_args(args)
    if engine is None:
        return run_http_load(
            args.url, payloads, arrivals, pipeline=args.example, timeout_s=args.timeout
        )
    from ..serving.locust_drive import with_client

    run = run_http_load(
        args.url,
        payloads,
        arrivals,
        pipeline=args.example,
        timeout_s=args.timeout,
        driver=engine.drive,
    )
    return with_client(run, engine.client_name())
