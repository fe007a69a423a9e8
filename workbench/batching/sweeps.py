"""Sweeps: simulated latency and throughput over a grid of batcher settings, one row per (rate_rps,
max_batch_size, max_wait_ms), each on the same seeded arrival process."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import pandas as pd

from .arrivals import Arrivals
from .policy import BatchPolicy
from .service_model import ServiceModel
from .simulator import simulate
from .summary import load_summary

SWEEP_COLUMNS = [
    "rate_rps",
    "max_batch_size",
    "max_wait_ms",
    "concurrency",
    "requests",
    "capacity_rps",
    "stable",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "mean_ms",
    "throughput_rps",
    "mean_batch_size",
    "utilization",
    "batch_wait_p50_ms",
    "batch_wait_p99_ms",
    "queue_wait_p50_ms",
    "queue_wait_p99_ms",
    "service_p50_ms",
    "service_p99_ms",
]


def sweep(
    model: ServiceModel,
    rates_rps: Iterable[float],
    max_batch_sizes: Iterable[int],
    max_waits_ms: Iterable[float],
    *,
    requests: int = 100_000,
    concurrency: int = 1,
    seed: int = 0,
    **arrival_options: Any,
) -> pd.DataFrame:
    """Simulate every grid point: one row per point with :data:`SWEEP_COLUMNS` (ms; end to end
    unless prefixed by a component); ``arrival_options`` go to :class:`Arrivals`."""
    process = arrival_options.pop("process", "poisson")
    rows = []
    for rate, size, wait in itertools.product(rates_rps, max_batch_sizes, max_waits_ms):
        policy = BatchPolicy(int(size), float(wait), concurrency)
        arrivals = Arrivals(
            process, rate_rps=float(rate), count=requests, seed=seed, **arrival_options
        )
        sim = simulate(model, arrivals, policy, seed=seed)
        rows.append(sweep_row(sim.requests, policy, float(rate), sim.capacity_rps))
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def sweep_row(
    requests: pd.DataFrame, policy: BatchPolicy, rate_rps: float, capacity_rps: float
) -> dict[str, Any]:
    """One sweep row from a requests table (simulated or live)."""
    s = load_summary(requests, policy.concurrency)
    e2e = s["end_to_end"]
    row = {
        "rate_rps": rate_rps,
        **policy.params(),
        "requests": s["requests"],
        "capacity_rps": capacity_rps,
        "stable": bool(rate_rps < capacity_rps),
        **{k: e2e[k] for k in ("p50_ms", "p95_ms", "p99_ms", "mean_ms")},
        **{k: s[k] for k in ("throughput_rps", "mean_batch_size", "utilization")},
    }
    for part in ("batch_wait", "queue_wait", "service"):
        row |= {f"{part}_{k}": s[part][k] for k in ("p50_ms", "p99_ms")}
    return row
