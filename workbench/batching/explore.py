"""The tables behind the batching explorer: one batcher setting and the two sweeps around it.

Moved out of the widget (``workbench.widgets.batching``) so that the widget
only wires sliders to this function and to ``workbench.plots.batching``, and
so that a notebook or a test gets the same numbers without ipywidgets.
"""

from __future__ import annotations

from typing import Any

from .arrivals import Arrivals
from .policy import BatchPolicy
from .service_model import ServiceModel
from .simulator import simulate
from .summary import load_summary, percentile_requests
from .sweeps import sweep

WAITS_MS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0)
RATE_FRACTIONS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.8, 0.9, 0.95)


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

    Out: ``summary`` (:func:`load_summary` of the point, ms), ``at`` (its requests at p50
    and p99 with their parts, :func:`percentile_requests`), ``curve`` (a
    :func:`sweep` table over :data:`RATE_FRACTIONS` of the capacity plus the
    rate itself, at this max batch and wait), ``waits`` (a sweep table over
    :data:`WAITS_MS` plus this wait, at this rate), ``capacity_rps`` (req/s at
    this max batch, full batches back to back), ``stable`` (rate below
    capacity) and ``simulations`` (how many simulations this took).
    """
    policy = BatchPolicy(int(max_batch_size), float(max_wait_ms))
    arrivals = Arrivals("poisson", rate_rps=float(rate_rps), count=requests, seed=seed)
    sim = simulate(model, arrivals, policy, seed=seed)
    capacity = sim.capacity_rps
    rates = sorted({*(f * capacity for f in RATE_FRACTIONS), float(rate_rps)})
    waits = sorted({*WAITS_MS, float(max_wait_ms)})
    curve = sweep(model, rates, [max_batch_size], [max_wait_ms], requests=requests, seed=seed)
    wait_table = sweep(model, [rate_rps], [max_batch_size], waits, requests=requests, seed=seed)
    return {
        "summary": load_summary(sim.requests),
        "at": percentile_requests(sim.requests),
        "curve": curve,
        "waits": wait_table,
        "capacity_rps": capacity,
        "stable": bool(sim.stable),
        "simulations": 1 + len(rates) + len(waits),
    }


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
