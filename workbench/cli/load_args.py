"""What ``load``, ``load --url`` (the serve wing's) and ``simulate`` share: the batcher's options,
the arrival process, the summary keys; here so that their two modules form no import cycle."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ConfigError
from ..units import NS_PER_S, ns_to_s
from .output import add_number, check_memory, number
from ..batching.arrivals import Arrivals
from ..batching.policy import BatchPolicy
from ..batching.continuous import ContinuousPolicy

RATE = number("--rate", 1e-3, 1e7, "requests/s")
BATCH = number("--max-batch-size", 1, 65_536, "items", integer=True)
WAIT_MS = number("--max-wait-ms", 0, 3_600_000, "ms")
CONCURRENCY = number("--concurrency", 1, 1024, "batches", integer=True)
# 1 us at least: an on window of 5e-324 ms is 0 ns, and every arrival then fell in one instant
ON_MS = number("--burst-on-ms", 0.001, 3_600_000, "ms")
OFF_MS = number("--burst-off-ms", 0.001, 3_600_000, "ms")
MAX_SEQS = number("--max-num-seqs", 1, 65_536, "sequences", integer=True)
MAX_TOKENS = number("--max-batched-tokens", 1, 2**24, "tokens", integer=True)
CHUNK = number("--chunk-tokens", 1, 2**24, "tokens", integer=True)
SEED = number("--seed", 0, 2**63 - 1, "", integer=True)
# per request: the schedule, the request and batch tables and the simulator's lists
BYTES_PER_ARRIVAL = 400
LAST_ARRIVAL_NS = 2**62  # arrival times past this would wrap int64 in sums and differences


def check_schedule(rate_rps: float, count: int | None, duration_s: float | None) -> None:
    """Refuse, before anything is drawn, a schedule that cannot fit in memory or in int64 nanoseconds."""
    expected = count if count is not None else rate_rps * (duration_s or 0.0) * 1.1 + 100
    check_memory(
        f"--rate {rate_rps:g} for {'--requests' if count is not None else '--duration'}",
        expected,
        BYTES_PER_ARRIVAL,
    )
    last_ns = (count / rate_rps if count is not None else (duration_s or 0.0)) * NS_PER_S
    if last_ns > LAST_ARRIVAL_NS:
        raise ConfigError(
            f"--rate {rate_rps:g}: {count if count is not None else duration_s} arrivals at this rate "
            f"end after {ns_to_s(last_ns):.3g} s, past what int64 nanoseconds hold; raise --rate or "
            "ask for fewer requests"
        )


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
    add_number(p, RATE, None, "mean arrival rate (not used when replaying a file)")
    add_number(p, BATCH, 8, "largest batch (default 8)")
    add_number(
        p,
        WAIT_MS,
        5.0,
        "dispatch once the oldest queued request has waited this long (default 5; 0: at once)",
    )
    add_number(p, CONCURRENCY, 1, "batches executed at once (default 1)")
    p.add_argument("--arrivals", default="poisson", metavar="PROCESS", help=ARRIVAL_HELP)
    add_number(p, ON_MS, 50.0, "bursty: length of an on window (default 50)")
    add_number(p, OFF_MS, 150.0, "bursty: length of an off window (default 150)")
    add_number(p, SEED, 0, "seed of the arrival process and service draws (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def arrivals_from_args(args, count, duration):
    if args.arrivals in ("poisson", "bursty"):
        if args.rate is None:
            raise ConfigError(f"--rate is required with --arrivals {args.arrivals}")
        check_schedule(args.rate, count, duration)
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


def batch_size_is_max(args, command: str = "load") -> None:
    """``--batch-size`` is ``--max-batch-size`` where the command builds the pipeline for its batcher."""
    if args.batch_size is not None and args.batch_size != args.max_batch_size:
        raise ConfigError(
            f"--batch-size: {command} builds the pipeline for --max-batch-size; leave --batch-size out"
        )
    args.batch_size = args.max_batch_size


def policy_from_args(args):
    return BatchPolicy(args.max_batch_size, args.max_wait_ms, args.concurrency)


def add_continuous_arguments(p: argparse.ArgumentParser) -> None:
    """The options of continuous batching (``workbench.batching.continuous``)."""
    g = p.add_argument_group(
        "continuous batching (a generative pipeline with a step API; --max-batch-size and "
        "--max-wait-ms do not apply to it)"
    )
    add_number(g, MAX_SEQS, None, "sequences in the running batch at most (default 8)")
    add_number(g, MAX_TOKENS, None, "tokens a step: decodes and prefill chunks (default 512)")
    add_number(
        g, CHUNK, None, "chunked prefill: prompt tokens of a sequence a step (default: whole)"
    )


def continuous_from_args(args):
    """The ``ContinuousPolicy`` of the flags, None when none was given (then the defaults)."""
    keys = ("max_num_seqs", "max_batched_tokens", "chunk_tokens")
    given = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    return ContinuousPolicy(**given) if given else None


def summary_json(summary: dict, middle: dict) -> dict:
    """A load or simulation summary as JSON, ``middle`` (the command's own keys) before its counts."""
    from ..batching.summary import SCHEDULED  # pandas: not at the CLI's import

    counts = ("utilization", "batch_sizes", "requests", "failed", "batches")
    scheduled = {k: summary[k] for k in SCHEDULED if k in summary}  # load, load --url
    latency = {k: summary[k] for k in SUMMARY_KEYS} | scheduled
    return latency | middle | {k: summary[k] for k in counts}


def schedule_keys(load) -> dict:
    """A scheduled run's mark in its JSON: ``generator_lag_p99_ms``, ``behind_schedule``, ``lag_p99_limit_ms``."""
    keys = ("generator_lag_p99_ms", "behind_schedule", "lag_p99_limit_ms")
    return {k: getattr(load, k) for k in keys}


def schedule_line(load) -> str:
    """What end to end is timed from, and the mark of a run whose generator fell behind (text output)."""
    timed = "end to end is timed from each request's due time; 'from send' from its actual send"
    if not load.behind_schedule:
        return timed
    return (
        f"BEHIND SCHEDULE: generator lag p99 {load.generator_lag_p99_ms:.3f} ms >= "
        f"{load.lag_p99_limit_ms:g} ms, so this run sent another load than asked for ({timed}); "
        "gate will not judge it (exit 4)"
    )


def describe_arrivals(arrivals) -> str:
    """``poisson 50 req/s `` (a replayed file has no rate): the start of :func:`describe_load`."""
    a = arrivals.params()
    return f"{a['process']} " + (f"{a['rate_rps']:g} req/s " if "rate_rps" in a else "")


def describe_load(arrivals, policy) -> str:
    return (
        f"{describe_arrivals(arrivals)}max_batch_size={policy.max_batch_size} "
        f"max_wait_ms={policy.max_wait_ms:g} concurrency={policy.concurrency}"
    )
