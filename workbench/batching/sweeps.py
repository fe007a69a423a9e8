"""Sweeps: simulated latency and throughput over a grid of batcher settings, one row per (rate_rps,
max_batch_size, max_wait_ms), each on the same seeded arrival process; and the tables of the
batching explorer (``workbench.widgets.batching``): one setting and the two sweeps around it."""

from __future__ import annotations

import itertools
from dataclasses import fields
from collections.abc import Iterable
from typing import Any

import pandas as pd

from .arrivals import Arrivals
from .policy import BatchPolicy
from .service_model import ServiceModel
from .simulator import simulate
from .summary import load_summary, percentile_requests

E2E_MS = ("p50_ms", "p95_ms", "p99_ms", "mean_ms")  # end to end
LOAD = ("throughput_rps", "mean_batch_size", "utilization")
PARTS = ("batch_wait", "queue_wait", "service")  # each with p50_ms and p99_ms
SWEEP_COLUMNS = [
    "rate_rps",
    *(f.name for f in fields(BatchPolicy)),
    "requests",
    "capacity_rps",
    "stable",
    *E2E_MS,
    *LOAD,
    *(f"{part}_{k}" for part in PARTS for k in ("p50_ms", "p99_ms")),
]
WAITS_MS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
RATE_FRACTIONS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 0.95)
CURVE_SEEDS = 3  # the rate curve's seeded runs (see seeded_spread)


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
        **{k: e2e[k] for k in E2E_MS},
        **{k: s[k] for k in LOAD},
    }
    for part in PARTS:
        row |= {f"{part}_{k}": s[part][k] for k in ("p50_ms", "p99_ms")}
    return row


def batching_point(
    model: ServiceModel,
    rate_rps: float,
    max_batch_size: int,
    max_wait_ms: float,
    *,
    requests: int = 5_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Simulate one setting on a seeded Poisson schedule: its ``summary``, ``at`` (requests at p50
    and p99), ``curve`` (a sweep over :data:`RATE_FRACTIONS` of capacity and the rate), ``waits`` (a
    sweep over :data:`WAITS_MS` and the wait), ``capacity_rps``, ``stable`` and ``simulations``."""
    policy = BatchPolicy(int(max_batch_size), float(max_wait_ms))
    arrivals = Arrivals("poisson", rate_rps=float(rate_rps), count=requests, seed=seed)
    sim = simulate(model, arrivals, policy, seed=seed)
    capacity = sim.capacity_rps
    rates = sorted({*(f * capacity for f in RATE_FRACTIONS), float(rate_rps)})
    waits = sorted({*WAITS_MS, float(max_wait_ms)})
    curve = seeded_spread(
        [
            sweep(model, rates, [max_batch_size], [max_wait_ms], requests=requests, seed=seed + k)
            for k in range(CURVE_SEEDS)
        ]
    )
    wait_table = sweep(model, [rate_rps], [max_batch_size], waits, requests=requests, seed=seed)
    return {
        "summary": load_summary(sim.requests),
        "at": percentile_requests(sim.requests),
        "curve": curve,
        "waits": wait_table,
        "capacity_rps": capacity,
        "stable": bool(sim.stable),
        "simulations": 1 + CURVE_SEEDS * len(rates) + len(waits),
    }


def seeded_spread(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """The seeds' median of the same sweep, plus ``p99_lo_ms`` and ``p99_hi_ms`` (their smallest and
    largest p99): near capacity a few long busy periods set a run's p99, and the range shows it."""
    both = pd.concat(tables, ignore_index=True)
    keys = ["rate_rps", "max_batch_size", "max_wait_ms"]
    grouped = both.groupby(keys, sort=False)
    out = grouped.median(numeric_only=True).reset_index()
    out["stable"] = grouped["stable"].all().to_numpy()
    out["p99_lo_ms"] = grouped["p99_ms"].min().to_numpy()
    out["p99_hi_ms"] = grouped["p99_ms"].max().to_numpy()
    return out[[*tables[0].columns, "p99_lo_ms", "p99_hi_ms"]]


def service_noise(runs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The noise flags of a service model's runs (``(label, RunMeta)``), which a simulation
    inherits: ``{"noisy": [(label, reasons)], "quiet": n, "unknown": n}``."""
    out: dict[str, Any] = {"noisy": [], "quiet": 0, "unknown": 0}
    for label, meta in runs:
        noisy = meta.noise.noisy if meta.noise else None
        if noisy is True:
            out["noisy"].append((label, list(meta.noise.reasons)))
        elif noisy is False:
            out["quiet"] += 1
        else:
            out["unknown"] += 1
    return out
