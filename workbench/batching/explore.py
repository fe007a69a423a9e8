"""The tables behind the batching explorer: one batcher setting and the two sweeps around it.

Moved out of the widget (``workbench.widgets.batching``) so that the widget
only wires sliders to this function and to ``workbench.plots.batching``, and
so that a notebook or a test gets the same numbers without ipywidgets.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .arrivals import Arrivals
from .policy import BatchPolicy
from .service_model import ServiceModel
from .simulator import simulate
from .summary import load_summary, percentile_requests
from .sweeps import sweep

WAITS_MS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
RATE_FRACTIONS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 0.95)
CURVE_SEEDS = 3  # the rate curve's seeded runs (see seeded_spread)


def batching_point(
    model: ServiceModel,
    rate_rps: float,
    max_batch_size: int,
    max_wait_ms: float,
    *,
    requests: int = 5_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Simulate one setting on a seeded Poisson schedule, and sweep rate and max wait around it.

    Out: ``summary`` (:func:`load_summary` of the point, ms), ``at`` (its requests at p50 and p99
    with their parts, :func:`percentile_requests`), ``curve`` (a :func:`sweep` table over
    :data:`RATE_FRACTIONS` of the capacity plus the rate itself, at this max batch and wait),
    ``waits`` (a sweep table over :data:`WAITS_MS` plus this wait, at this rate), ``capacity_rps``
    (req/s at this max batch, full batches back to back), ``stable`` (rate below capacity) and
    ``simulations`` (how many simulations this took).
    """
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
    """One sweep table from the same sweep on several seeds: per setting and rate, each number the
    median over the seeds, plus ``p99_lo_ms`` and ``p99_hi_ms`` (the seeds' smallest and largest
    p99): near capacity a finite run's p99 is set by a few long busy periods, and the range says how
    far one run's p99 can be trusted there."""
    both = pd.concat(tables, ignore_index=True)
    keys = ["rate_rps", "max_batch_size", "max_wait_ms"]
    grouped = both.groupby(keys, sort=False)
    out = grouped.median(numeric_only=True).reset_index()
    out["stable"] = grouped["stable"].all().to_numpy()
    out["p99_lo_ms"] = grouped["p99_ms"].min().to_numpy()
    out["p99_hi_ms"] = grouped["p99_ms"].max().to_numpy()
    return out[[*tables[0].columns, "p99_lo_ms", "p99_hi_ms"]]


def service_noise(runs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The noise flags of the runs a service model was built from: the simulation inherits their noise.

    In: ``(label, meta)`` per run (``meta`` a ``RunMeta``). Out: ``{"noisy": [(label, [reasons])],
    "quiet": n, "unknown": n}``; unknown is a run without noise readings.
    """
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
