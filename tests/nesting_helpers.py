"""Helpers for the pathological-nesting tests (analysis and figures): events built in code, and a
machine-relative time budget so a busy machine loosens the limits while a quadratic walk still fails."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from workbench.trace.schema import COLUMNS, KIND_DTYPE


def host_events(ts_ns, dur_ns, names) -> pd.DataFrame:
    """An events table of cpu_op rows on one thread, built straight from arrays (no JSON round trip)."""
    n = len(ts_ns)
    text = lambda values: pd.Categorical(
        values, categories=pd.Index(sorted(set(values)), dtype="str")
    )
    data = {
        "ts_ns": np.asarray(ts_ns, np.int64),
        "dur_ns": np.asarray(dur_ns, np.int64),
        "name": text(list(names)),
        "cat": text(["cpu_op"] * n),
        "kind": pd.Categorical(["cpu_op"] * n, dtype=KIND_DTYPE),
        "pid": text(["1"] * n),
        "tid": text(["1"] * n),
    }
    none = pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, bool))
    data |= {c: none for c in ("device", "stream", "correlation", "bytes", "ext_id")}
    return pd.DataFrame(data, columns=list(COLUMNS))


def reference_s() -> float:
    """Seconds this machine takes right now for a fixed linear workload (a 1e6-step Python
    loop and a 1e6-element sort): time limits are multiples of it."""
    start = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i
    np.sort(np.random.default_rng(0).integers(0, 1 << 40, 1_000_000))
    return time.perf_counter() - start


def within(elapsed: float, before: float, multiple: float) -> bool:
    """Was ``elapsed`` at most ``multiple`` reference workloads (the slower of before and after)?"""
    return elapsed <= multiple * max(before, reference_s())
