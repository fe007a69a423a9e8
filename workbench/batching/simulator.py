"""Discrete-event simulation of the dynamic batcher (``workbench.batching.policy``), once per batch.

A batch's close follows from the arrivals (the rule) and the start of the batch before (the handoff
slot), its start from the earliest free executor, its end from a service time drawn, seeded and
independently per batch, from the :class:`ServiceModel`. A rate at or above capacity is ``stable:
False``: its figures are the finite horizon's and grow with the number of requests.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..units import NS_PER_S
from .arrivals import Arrivals
from .policy import BatchPolicy, wait_split
from .service_model import ServiceModel

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
    arrivals: list, u: list, tables: list, max_batch_size: int, max_wait_ns: int, concurrency: int
) -> tuple[list, list, list, list, list]:
    """The event loop: per batch (first request, close, start, end, due), float ns. Quantiles are
    inlined (each sample list repeats its last value, so ``k + 1`` never overruns): this loop is
    the simulator's whole cost."""
    n, b, w = len(arrivals), max_batch_size, max_wait_ns
    firsts, closes, starts, ends, dues = [], [], [], [], []
    free = [float("-inf")] * concurrency  # a heap of executor free times
    slot_free = float("-inf")
    i = m = 0
    while i < n:
        close = arrivals[i] + w
        if i + b - 1 < n and arrivals[i + b - 1] < close:
            close = arrivals[i + b - 1]
        dues.append(close)
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


def simulate(
    model: ServiceModel, arrivals: Arrivals | np.ndarray, policy: BatchPolicy, *, seed: int = 0
) -> Simulation:
    """Simulate the batcher on an arrival schedule (``Arrivals`` or sorted int64 ns offsets)."""
    model.check(policy.max_batch_size)
    if isinstance(arrivals, Arrivals):
        times, process = arrivals.times_ns(), arrivals.params()
    else:
        times = np.asarray(arrivals, dtype=np.int64)
        process = {"process": "given", "count": len(times)}
    rate = _rate_rps(arrivals, times)
    u = np.random.default_rng([seed, SEED_OFFSET]).random(max(len(times), 1)).tolist()
    tables = _size_tables(model, policy.max_batch_size)
    firsts, closes, starts, ends, dues = batch_loop(
        times.tolist(), u, tables, policy.max_batch_size, policy.max_wait_ns, policy.concurrency
    )
    batches = _batch_table(firsts, closes, starts, ends, len(times), dues)
    requests = _request_table(times, batches)
    capacity = model.capacity_rps(policy.max_batch_size, policy.concurrency)
    meta = {
        "arrivals": process,
        "seed": seed,
        "service_model": model.describe(),
        "service_draws": "independent",
        "extrapolated_below_smallest_size": bool(model.extrapolates_below(1)),
    }
    return Simulation(requests, batches, policy, capacity, rate, meta)


def _rate_rps(arrivals, times: np.ndarray) -> float:
    if isinstance(arrivals, Arrivals) and arrivals.process != "replay":  # rate_rps > 0 (checked)
        return float(arrivals.rate_rps)
    span = float(times[-1] - times[0]) if len(times) > 1 else 0.0
    return (len(times) - 1) * NS_PER_S / span if span > 0 else float("inf")


def _batch_table(firsts, closes, starts, ends, n: int, dues) -> pd.DataFrame:
    first = np.asarray(firsts, dtype=np.int64)
    close, start, end, due = (
        np.rint(np.asarray(x)).astype(np.int64) for x in (closes, starts, ends, dues)
    )
    size = np.diff(np.append(first, n))
    return pd.DataFrame(
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


def _request_table(times: np.ndarray, batches: pd.DataFrame) -> pd.DataFrame:
    size = batches["size"].to_numpy()
    batch = np.repeat(batches["batch"].to_numpy(), size)
    close = batches["close_ns"].to_numpy()[batch]
    start = batches["start_ns"].to_numpy()[batch]
    end = batches["end_ns"].to_numpy()[batch]
    batch_wait, queue_wait = wait_split(times, batches["due_ns"].to_numpy()[batch], close, start)
    return pd.DataFrame(
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
