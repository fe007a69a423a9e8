"""Discrete-event simulation of the dynamic batcher (``workbench.batching.policy``), once per batch.

A batch's close follows from the arrivals (the rule) and the start of the batch before (the handoff
slot), its start from the earliest free executor, its end from a service time drawn, seeded, from
the :class:`ServiceModel`: independently per batch, or in the order the model's runs measured them
(``draws="sequence"``); from the back-to-back calls when every executor is busy at its close and
the model has ``states``. A rate at or above capacity is ``stable:
False``: its figures are the finite horizon's and grow with the number of requests.

Sweeps (:func:`sweep`) simulate a grid of settings, one row per (rate_rps, max_batch_size,
max_wait_ms), each on the same seeded arrival process; :func:`batching_point` makes the tables of
the batching explorer (``workbench.widgets.batching``): one setting and the two sweeps around it.
"""

from __future__ import annotations

import heapq
import itertools
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..units import NS_PER_S
from .arrivals import Arrivals
from .policy import BatchPolicy, wait_split
from .service_model import ServiceModel
from .summary import load_summary, percentile_requests

SEED_OFFSET = 0x5EC  # service draws use another stream than the arrivals of the same seed


@dataclass
class Simulation:
    """What a simulation produced: ``requests`` (a load run's request columns, int64 ns from the
    first arrival) and ``batches`` (``batch``, ``size``, ``first``, ``due_ns``, ``close_ns``,
    ``start_ns``, ``end_ns``, ``service_ns``)."""

    requests: pd.DataFrame
    batches: pd.DataFrame
    policy: BatchPolicy
    capacity_rps: float
    rate_rps: float
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def stable(self) -> bool:
        return self.rate_rps < self.capacity_rps


def _size_tables(model: ServiceModel, max_batch_size: int) -> list[tuple]:
    """Per size b (index b): (lo samples, len - 1, hi samples, len - 1, weight of hi), lists."""
    lists: dict[int, list] = {}

    def padded(values: np.ndarray) -> list:
        if id(values) not in lists:  # one list per measured size, shared by the sizes around it
            lists[id(values)] = values.tolist() + [float(values[-1])]
        return lists[id(values)]

    tables: list[tuple] = [()]
    for b in range(1, max_batch_size + 1):
        lo, hi, w = model.bracket(b)
        tables.append((padded(lo), len(lo) - 1, padded(hi), len(hi) - 1, w))
    return tables


def batch_loop(
    arrivals: list,
    u: list,
    tables: list,
    max_batch_size: int,
    max_wait_ns: int,
    concurrency: int,
    busy: tuple[list, list] | None = None,
) -> tuple[list, list, list, list, list]:
    """The event loop: per batch (first request, close, start, end, due), float ns. Quantiles are
    inlined (lists padded: ``k + 1`` never overruns): this loop is the simulator's whole cost.
    ``busy``: ``(u, tables)`` of the calls made back to back, drawn for a batch that closes while
    every executor is busy (``u`` and ``tables`` then those made after an idle gap), each state's
    quantiles taken in turn."""
    n, b, w = len(arrivals), max_batch_size, max_wait_ns
    firsts, closes, starts, ends, dues = [], [], [], [], []
    free = [float("-inf")] * concurrency  # a heap of executor free times
    slot_free = float("-inf")
    i = m = mb = 0
    while i < n:
        close = arrivals[i] + w
        if i + b - 1 < n and arrivals[i + b - 1] < close:
            close = arrivals[i + b - 1]
        dues.append(close)
        if close < slot_free:
            close = slot_free
        j = i + 1 if b == 1 else bisect_right(arrivals, close, i, i + b if i + b < n else n)
        if busy is not None and free[0] > close:  # every executor busy: a back-to-back call
            q, table = busy[0][mb], busy[1][j - i]
            mb += 1
        else:
            q, table = u[m], tables[j - i]
            m += 1
        lo, nlo, hi, nhi, wt = table
        x = q * nlo
        k = int(x)
        s = lo[k] + (x - k) * (lo[k + 1] - lo[k])
        if wt:
            x = q * nhi
            k = int(x)
            s += wt * (hi[k] + (x - k) * (hi[k + 1] - hi[k]) - s)
        start = free[0] if free[0] > close else close
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
    return firsts, closes, starts, ends, dues


DRAWS = ("independent", "sequence")


def simulate(
    model: ServiceModel,
    arrivals: Arrivals | np.ndarray,
    policy: BatchPolicy,
    *,
    seed: int = 0,
    draws: str = "independent",
) -> Simulation:
    """Simulate the batcher on an arrival schedule (``Arrivals`` or sorted int64 ns offsets).

    ``draws``: ``"independent"`` (each batch's service quantile drawn on its own) or
    ``"sequence"`` (the quantiles of the model's runs in the order their calls ran, from a seeded
    start, wrapping): a calibration's slow spells stay spells, and queueing feels them
    (``benchmarks/results/sim_live.md``: a live tabular run's own service times, drawn each on its
    own, gave 0.43 of its p99 at 0.6 of capacity; in order, 0.80-1.13)."""
    model.check(policy.max_batch_size)
    if draws not in DRAWS:
        raise ConfigError(f"draws must be one of {', '.join(DRAWS)}, got {draws!r}")
    if draws == "sequence" and (model.order is None or not len(model.order)):
        raise ConfigError(
            "draws='sequence' replays the order of measured runs: this service model was made "
            "from samples (service_model_from_runs keeps the order)"
        )
    if isinstance(arrivals, Arrivals):
        times, process = arrivals.times_ns(), arrivals.params()
    else:
        times = np.asarray(arrivals, dtype=np.int64)
        process = {"process": "given", "count": len(times)}
    span = float(times[-1] - times[0]) if len(times) > 1 else 0.0
    measured = (len(times) - 1) * NS_PER_S / span if span > 0 else float("inf")
    # the process's own rate (replay has none), or the schedule's
    rate = process.get("rate_rps", measured)
    n, size = max(len(times), 1), policy.max_batch_size
    if model.states is None:
        u, tables, busy = _quantiles(model, draws, seed, n), _size_tables(model, size), None
    else:  # each state its own quantile stream (another seed's for the back-to-back calls)
        idle, back = model.states
        u, tables = _quantiles(idle, draws, seed, n), _size_tables(idle, size)
        busy = (_quantiles(back, draws, [seed, 1], n), _size_tables(back, size))
    firsts, closes, starts, ends, dues = batch_loop(
        times.tolist(),
        u,
        tables,
        size,
        policy.max_wait_ns,
        policy.concurrency,
        busy,
    )
    batches, requests = _tables(times, firsts, closes, starts, ends, dues)
    capacity = model.capacity_rps(policy.max_batch_size, policy.concurrency)
    meta = {
        "arrivals": process,
        "seed": seed,
        "service_model": model.describe(),
        "service_draws": draws,
        "extrapolated_below_smallest_size": bool(model.extrapolates_below(1)),
    }
    return Simulation(requests, batches, policy, capacity, rate, meta)


def _quantiles(model: ServiceModel, draws: str, seed, n: int) -> list[float]:
    """``n`` service quantiles for the batches, in order (:func:`simulate`'s ``draws``); ``seed``
    an int or a list of ints (another stream)."""
    rng = np.random.default_rng([*np.atleast_1d(seed).tolist(), SEED_OFFSET])
    if draws == "independent":
        return rng.random(n).tolist()
    order = model.order
    start = int(rng.integers(len(order)))
    return order[(start + np.arange(n)) % len(order)].tolist()


def _tables(times: np.ndarray, firsts, closes, starts, ends, dues):
    """``(batches, requests)`` of :class:`Simulation` from the event loop's lists (float ns)."""
    first = np.asarray(firsts, dtype=np.int64)
    close, start, end, due = (
        np.rint(np.asarray(x)).astype(np.int64) for x in (closes, starts, ends, dues)
    )
    size = np.diff(np.append(first, len(times)))
    batches = pd.DataFrame(
        {
            "batch": np.arange(len(first), dtype=np.int64),
            "size": size,
            "first": first,
            "due_ns": due,
            "close_ns": close,
            "start_ns": start,
            "end_ns": end,
            "service_ns": end - start,
        }
    )
    batch = np.repeat(batches["batch"].to_numpy(), size)  # each request's
    close, start, end, due = close[batch], start[batch], end[batch], due[batch]
    batch_wait, queue_wait = wait_split(times, due, close, start)
    requests = pd.DataFrame(
        {
            "request": np.arange(len(times), dtype=np.int64),
            "arrival_ns": times,
            "batch_wait_ns": batch_wait,
            "queue_wait_ns": queue_wait,
            "service_ns": end - start,
            "dur_ns": end - times,
            "batch": batch,
            "batch_size": size[batch],
            "ok": np.ones(len(times), dtype=bool),
        }
    )
    return batches, requests


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
    """Simulate one setting on a seeded Poisson schedule, with a sweep over :data:`RATE_FRACTIONS`
    of capacity (``curve``) and one over :data:`WAITS_MS` (``waits``)."""
    policy = BatchPolicy(int(max_batch_size), float(max_wait_ms))
    arrivals = Arrivals("poisson", rate_rps=float(rate_rps), count=requests, seed=seed)
    sim = simulate(model, arrivals, policy, seed=seed)
    capacity = sim.capacity_rps
    rates = sorted({*(f * capacity for f in RATE_FRACTIONS), float(rate_rps)})
    waits = sorted({*WAITS_MS, float(max_wait_ms)})
    seeded = partial(sweep, model, rates, [max_batch_size], [max_wait_ms], requests=requests)
    curve = seeded_spread([seeded(seed=seed + k) for k in range(CURVE_SEEDS)])
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
