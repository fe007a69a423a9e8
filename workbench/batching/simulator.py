"""Discrete-event simulation of the dynamic batcher (``workbench.batching.policy``).

The loop runs once per batch, not per event: a batch's close time follows from
the arrival times (the dispatch rule) and the start time of the batch before
it (the one-deep handoff), its start from the earliest free executor, its end
from a service time drawn from the :class:`ServiceModel`. Per-request columns
are then filled with numpy. One core simulates 10^6 requests in about a
second (``benchmarks/bench_simulator.py``).

Service quantiles are drawn one per batch from a seeded generator, so a
simulation is repeatable. By default the draws are independent; given
``ranks`` (a measured run's quantile ranks in batch order, see
:func:`workbench.batching.contention.service_ranks`) they follow that run's
sequence instead, so the machine's slow phases stay together as they did.
Given ``speed`` (window length, factors; see :mod:`workbench.batching.phases`)
each batch's drawn time is multiplied by the factor of the window it starts in:
the machine's speed as a level that holds for a while, not a per-batch draw.
An arrival rate at or above capacity is reported as ``stable: False``; the
figures are those of the finite horizon (they grow with the number of requests
instead of converging).
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..units import NS_PER_S
from .arrivals import Arrivals
from .policy import BatchPolicy
from .service_model import RESPONSE_WINDOW_NS, ServiceModel

SEED_OFFSET = 0x5EC  # service draws use another stream than the arrivals of the same seed


@dataclass
class Simulation:
    """What a simulation produced.

    requests: one row per request; ``request``, ``arrival_ns``,
        ``batch_wait_ns``, ``queue_wait_ns``, ``service_ns``, ``dur_ns`` (end
        to end, the sum of the three), ``batch``, ``batch_size``, ``ok``
        (always True), all int64 ns from the first arrival.
    batches: one row per batch; ``batch``, ``size``, ``close_ns``,
        ``start_ns``, ``end_ns``, ``service_ns``.
    """

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


def batch_loop(arrivals: list, u: list, tables: list, max_batch_size: int, max_wait_ns: int,
               concurrency: int, per_arrival_ns: float = 0.0,
               per_response_ns: float = 0.0, speed: tuple[float, list] | None = None) -> tuple[list, list, list, list]:
    """The event loop: per batch (first request index, close, start, end), times as floats (ns).

    Quantiles are inlined (``x = u * (n - 1)``, linear between order
    statistics; each sample list carries a repeated last value so ``k + 1``
    never overruns): this loop is the simulator's whole cost.

    Served contention (see :mod:`workbench.batching.service_model`): a batch
    starting within ``RESPONSE_WINDOW_NS`` of the previous batch's end gets
    ``per_response_ns`` per request of that batch; then ``per_arrival_ns`` per
    arrival in ``[start, start + service)``, the service time found as a fixed
    point (three rounds: the window grows with each arrival it takes in).

    speed: ``(window_ns, factors)``; the drawn time of a batch starting at
    ``t`` after the first arrival is multiplied by ``factors[t // window_ns]``
    (the last factor past the end), before the contention costs.
    """
    n, b, w = len(arrivals), max_batch_size, max_wait_ns
    window, factors = speed if speed is not None else (0.0, [])
    last_factor, origin = len(factors) - 1, arrivals[0] if n else 0
    firsts, closes, starts, ends = [], [], [], []
    free = [float("-inf")] * concurrency  # a heap of executor free times
    slot_free = last_end = float("-inf")
    last_size = 0
    i = m = 0
    while i < n:
        close = arrivals[i] + w
        if i + b - 1 < n and arrivals[i + b - 1] < close:
            close = arrivals[i + b - 1]
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
    return firsts, closes, starts, ends


def simulate(model: ServiceModel, arrivals: Arrivals | np.ndarray, policy: BatchPolicy, *, seed: int = 0,
             ranks: np.ndarray | None = None, speed: tuple[int, np.ndarray] | None = None) -> Simulation:
    """Simulate the batcher on an arrival schedule (``Arrivals`` or sorted int64 ns offsets).

    ranks: service-time quantile ranks in [0, 1], one per batch in the order
        they ran; the simulation uses them from a seeded random offset,
        wrapping around. Default: independent uniform draws.
    speed: ``(window_ns, factors)``, the service-speed level per window of
        the schedule (from the first arrival), e.g. a
        :meth:`workbench.batching.phases.Phases.trajectory`; default: 1.
    """
    model.check(policy.max_batch_size)
    times = arrivals.times_ns() if isinstance(arrivals, Arrivals) else np.asarray(arrivals, dtype=np.int64)
    rate = _rate_rps(arrivals, times)
    u = _draws(np.random.default_rng([seed, SEED_OFFSET]), max(len(times), 1), ranks).tolist()
    tables = _size_tables(model, policy.max_batch_size)
    if speed is not None:
        window_ns, factors = speed
        factors = np.asarray(factors, dtype=float)
        if window_ns <= 0 or factors.ndim != 1 or not len(factors) or not np.all(factors > 0):
            raise ConfigError("speed: expected (window_ns > 0, a non-empty 1-d sequence of positive factors)")
        speed = (float(window_ns), factors.tolist())
    firsts, closes, starts, ends = batch_loop(times.tolist(), u, tables, policy.max_batch_size,
                                              policy.max_wait_ns, policy.concurrency,
                                              model.per_arrival_ns, model.per_response_ns, speed)
    batches = _batch_table(firsts, closes, starts, ends, len(times))
    requests = _request_table(times, batches)
    capacity = model.capacity_rps(policy.max_batch_size, policy.concurrency)
    meta = {"arrivals": arrivals.params() if isinstance(arrivals, Arrivals) else {"process": "given", "count": len(times)},
            "seed": seed, "service_model": model.describe(),
            "service_draws": "independent" if ranks is None else f"ranks of {len(ranks)} measured batches",
            "speed_windows": None if speed is None else len(speed[1]),
            "extrapolated_below_smallest_size": bool(model.extrapolates_below(1))}
    return Simulation(requests, batches, policy, capacity, rate, meta)


def _draws(rng: np.random.Generator, n: int, ranks: np.ndarray | None) -> np.ndarray:
    """``n`` quantile ranks: independent uniforms, or ``ranks`` from a random offset, wrapping around."""
    if ranks is None:
        return rng.random(n)
    ranks = np.asarray(ranks, dtype=float)
    if ranks.ndim != 1 or not len(ranks) or not np.all((ranks >= 0) & (ranks <= 1)):
        raise ConfigError("ranks: expected a non-empty 1-d sequence of quantile ranks in [0, 1]")
    return np.resize(np.roll(ranks, -int(rng.integers(len(ranks)))), n)


def _rate_rps(arrivals, times: np.ndarray) -> float:
    if isinstance(arrivals, Arrivals) and arrivals.rate_rps is not None and arrivals.process != "replay":
        return float(arrivals.rate_rps)
    span = float(times[-1] - times[0]) if len(times) > 1 else 0.0
    return (len(times) - 1) * NS_PER_S / span if span > 0 else float("inf")


def _batch_table(firsts, closes, starts, ends, n: int) -> pd.DataFrame:
    first = np.asarray(firsts, dtype=np.int64)
    close = np.rint(np.asarray(closes)).astype(np.int64)
    start = np.rint(np.asarray(starts)).astype(np.int64)
    end = np.rint(np.asarray(ends)).astype(np.int64)
    size = np.diff(np.append(first, n))
    return pd.DataFrame({"batch": np.arange(len(first), dtype=np.int64), "size": size, "first": first,
                         "close_ns": close, "start_ns": start, "end_ns": end, "service_ns": end - start})


def _request_table(times: np.ndarray, batches: pd.DataFrame) -> pd.DataFrame:
    size = batches["size"].to_numpy()
    batch = np.repeat(batches["batch"].to_numpy(), size)
    close = batches["close_ns"].to_numpy()[batch]
    start = batches["start_ns"].to_numpy()[batch]
    end = batches["end_ns"].to_numpy()[batch]
    return pd.DataFrame({
        "request": np.arange(len(times), dtype=np.int64), "arrival_ns": times,
        "batch_wait_ns": close - times, "queue_wait_ns": start - close, "service_ns": end - start,
        "dur_ns": end - times, "batch": batch, "batch_size": size[batch], "ok": np.ones(len(times), dtype=bool),
    })
