"""The batching simulator with the served-validation branches the package's simulator does not have.

``workbench.batching.simulator.simulate`` draws each batch's service time
independently from the measured samples: what every user feature needs. The
served validation (``research/served/validation.py``) also tried three things on
top, kept here with the loop that runs them:

* contention costs (``per_arrival_ns``, ``per_response_ns``, fitted by
  :func:`research.served.contention.fit_contention`): a batch starting within
  ``RESPONSE_WINDOW_NS`` of the previous batch's end gets ``per_response_ns``
  per request of that batch; then ``per_arrival_ns`` per arrival in
  ``[start, start + service)``, the service time found as a fixed point (three
  rounds: the window grows with each arrival it takes in);
* ``ranks``: the service quantiles drawn in a measured run's order
  (:func:`research.served.contention.service_ranks`) from a seeded offset,
  wrapping around, instead of independently;
* ``speed``: ``(window_ns, factors)``, each batch's drawn time multiplied by the
  factor of the window it starts in (:meth:`research.served.phases.Phases.trajectory`).

With none of them, :func:`simulate_served` gives exactly the package's
``simulate`` (``research/tests/test_served_simulate.py`` checks it). The
conclusions are in ``docs/serving.md`` and ``benchmarks/results/served_models.md``.
"""

from __future__ import annotations

import heapq
import inspect
from bisect import bisect_left, bisect_right

import numpy as np

from workbench.batching.arrivals import Arrivals
from workbench.batching.policy import BatchPolicy
from workbench.batching.service_model import ServiceModel
from workbench.batching.simulator import (
    SEED_OFFSET,
    Simulation,
    _batch_table,
    _rate_rps,
    _request_table,
    _size_tables,
)
from workbench.errors import ConfigError

from .contention import RESPONSE_WINDOW_NS


def served_batch_loop(
    arrivals: list,
    u: list,
    tables: list,
    max_batch_size: int,
    max_wait_ns: int,
    concurrency: int,
    per_arrival_ns: float = 0.0,
    per_response_ns: float = 0.0,
    speed: tuple[float, list] | None = None,
) -> tuple[list, list, list, list, list]:
    """``workbench.batching.simulator.batch_loop`` plus the contention costs and the speed levels:
    per batch (first request index, close, start, end, due), times as floats (ns)."""
    n, b, w = len(arrivals), max_batch_size, max_wait_ns
    window, factors = speed if speed is not None else (0.0, [])
    last_factor, origin = len(factors) - 1, arrivals[0] if n else 0
    firsts, closes, starts, ends, dues = [], [], [], [], []
    free = [float("-inf")] * concurrency  # a heap of executor free times
    slot_free = last_end = float("-inf")
    last_size = 0
    i = m = 0
    while i < n:
        close = arrivals[i] + w
        if i + b - 1 < n and arrivals[i + b - 1] < close:
            close = arrivals[i + b - 1]
        dues.append(
            close
        )  # when the rule alone would dispatch it; later when the handoff slot is busy
        if close < slot_free:
            close = slot_free
        j = i + 1 if b == 1 else bisect_right(arrivals, close, i, i + b if i + b < n else n)
        lo, nlo, hi, nhi, wt = tables[j - i]
        x = u[m] * nlo
        k = int(x)
        s = lo[k] + (x - k) * (lo[k + 1] - lo[k])
        if wt:
            x = u[m] * nhi
            k = int(x)
            s += wt * (hi[k] + (x - k) * (hi[k + 1] - hi[k]) - s)
        start = free[0] if free[0] > close else close
        if factors:
            k = int((start - origin) // window)
            s *= factors[k if k < last_factor else last_factor]
        if per_arrival_ns or per_response_ns:
            if start - last_end < RESPONSE_WINDOW_NS:
                s += per_response_ns * last_size
            if per_arrival_ns:
                base, before = s, bisect_right(arrivals, start)
                for _ in range(3):
                    s = base + per_arrival_ns * (bisect_left(arrivals, start + s) - before)
            if start + s > last_end:
                last_end, last_size = start + s, j - i
        if concurrency == 1:
            free[0] = start + s
        else:
            heapq.heapreplace(free, start + s)
        firsts.append(i)
        closes.append(close)
        starts.append(start)
        ends.append(start + s)
        slot_free = start
        i = j
        m += 1
    return firsts, closes, starts, ends, dues


def simulate_served(
    model: ServiceModel,
    arrivals: Arrivals | np.ndarray,
    policy: BatchPolicy,
    *,
    seed: int = 0,
    per_arrival_ns: float = 0.0,
    per_response_ns: float = 0.0,
    ranks: np.ndarray | None = None,
    speed: tuple[int, np.ndarray] | None = None,
) -> Simulation:
    """``workbench.batching.simulator.simulate`` with the contention costs, ``ranks`` and ``speed`` (module docstring)."""
    if not (per_arrival_ns >= 0 and per_response_ns >= 0):
        raise ConfigError(
            f"contention costs must be >= 0 ns, got {per_arrival_ns!r} per arrival and "
            f"{per_response_ns!r} per response"
        )
    model.check(policy.max_batch_size)
    times = (
        arrivals.times_ns()
        if isinstance(arrivals, Arrivals)
        else np.asarray(arrivals, dtype=np.int64)
    )
    u = draws(np.random.default_rng([seed, SEED_OFFSET]), max(len(times), 1), ranks).tolist()
    if speed is not None:
        window_ns, factors = speed
        factors = np.asarray(factors, dtype=float)
        if window_ns <= 0 or factors.ndim != 1 or not len(factors) or not np.all(factors > 0):
            raise ConfigError(
                "speed: expected (window_ns > 0, a non-empty 1-d sequence of positive factors)"
            )
        speed = (float(window_ns), factors.tolist())
    firsts, closes, starts, ends, dues = served_batch_loop(
        times.tolist(),
        u,
        _size_tables(model, policy.max_batch_size),
        policy.max_batch_size,
        policy.max_wait_ns,
        policy.concurrency,
        per_arrival_ns,
        per_response_ns,
        speed,
    )
    # The package's tables take the due times since its queue accounting (issue 30) splits the wait there.
    with_dues = "dues" in inspect.signature(_batch_table).parameters
    batches = _batch_table(firsts, closes, starts, ends, len(times), *([dues] if with_dues else []))
    meta = {
        "seed": seed,
        "service_model": model.describe(),
        "per_arrival_ms": per_arrival_ns / 1e6,
        "per_response_ms": per_response_ns / 1e6,
        "service_draws": "independent"
        if ranks is None
        else f"ranks of {len(ranks)} measured batches",
        "speed_windows": None if speed is None else len(speed[1]),
    }
    return Simulation(
        _request_table(times, batches),
        batches,
        policy,
        model.capacity_rps(policy.max_batch_size, policy.concurrency),
        _rate_rps(arrivals, times),
        meta,
    )


def draws(rng: np.random.Generator, n: int, ranks: np.ndarray | None) -> np.ndarray:
    """``n`` quantile ranks: independent uniforms, or ``ranks`` from a random offset, wrapping around."""
    if ranks is None:
        return rng.random(n)
    ranks = np.asarray(ranks, dtype=float)
    if ranks.ndim != 1 or not len(ranks) or not np.all((ranks >= 0) & (ranks <= 1)):
        raise ConfigError("ranks: expected a non-empty 1-d sequence of quantile ranks in [0, 1]")
    return np.resize(np.roll(ranks, -int(rng.integers(len(ranks)))), n)
