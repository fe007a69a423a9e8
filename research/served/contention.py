"""How much a served batch is slowed by the HTTP server around it, fitted from served runs.

In ``workbench serve`` the event loop (HTTP parsing, queueing, sending
responses) and the executor thread running the pipeline share the GIL. A batch
therefore takes longer when requests arrive during it and when it starts while
the previous batch's responses are still being sent. Measured on the tabular
example at batch size 1 (2-core VM, ``research/served/diag_served_work.py`` on the
served validation's run folders): 0.96 ms for a batch after an idle gap,
1.40 ms for one started within 200 us of the previous batch's end, and a
fitted 0.13 ms more per request that arrived during it.

:func:`fit_contention` fits, over the batches of one or more served runs,

    service_ns = base(size) + per_arrival_ns x arrivals + per_response_ns x responses

by least squares with one intercept per batch size, where ``responses`` is the
previous batch's size when it ended less than ``RESPONSE_WINDOW_NS`` before this
batch started (else 0), and ``arrivals`` counts the requests arriving in a
*fixed* window after the start (the median service time of the batch's size),
not in the batch's own service window: a batch that happened to be slow also
catches more arrivals, which would credit its slowness to them. The returned
samples are each batch's service time minus both costs (its actual arrivals),
the ``base`` the simulator adds the costs back to (:func:`research.served.
simulate.served_batch_loop`), plus each batch's dispatch gap. Negative costs (no effect
measurable) are set to 0.

The dispatch gap is the time a closed batch waited with the executor free:
``start - max(close, previous batch's end)``, the executor's wake-up and its
hand-off between batches (the GIL, taken back from the event loop). The
simulator starts a batch the moment it is closed and the executor is free, so
the gap is added to the batch's time in the samples. On the served validation's
runs it is 46-125 us at the median and 0.2-2 ms at p99 (three runs)
(``research/served/diag_served_gaps.py``). One executor, the served batcher's
default: with several, the previous batch's end is not when one became free.

Pure: pandas/numpy in, numbers out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.errors import ConfigError

RESPONSE_WINDOW_NS = (
    200_000  # a batch starting this soon after the one before overlaps its responses being sent
)


@dataclass(frozen=True)
class Contention:
    """Fitted costs (ns) and the service times without them, dispatch gaps added, per batch size (int64 ns, unsorted)."""

    per_arrival_ns: float
    per_response_ns: float
    samples: dict[int, np.ndarray]
    batches: int


def batch_features(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per batch of a load or served run (successful batches only), in start order.

    Columns: ``size``, ``start_ns``, ``service_ns``, ``arrivals`` (requests
    arriving in the batch's own service window), ``arrivals_fixed`` (in a window
    of its size's median service time), ``responses``, ``dispatch_gap_ns``
    (see module docstring).
    """
    need = ("batch", "ok", "arrival_ns", "batch_wait_ns", "queue_wait_ns", "service_ns")
    missing = [c for c in need if c not in requests.columns]
    if missing:
        raise ConfigError(
            f"contention fit needs load or served runs; requests table lacks {missing}"
        )
    req = requests[requests["batch"] >= 0]
    ok = req.groupby("batch")["ok"].all()
    req = req[req["batch"].isin(ok[ok].index)]
    close = req["arrival_ns"] + req["batch_wait_ns"]
    b = (
        req.assign(close_ns=close, start_ns=close + req["queue_wait_ns"])
        .groupby("batch")
        .agg(
            size=("batch", "size"),
            close_ns=("close_ns", "max"),
            start_ns=("start_ns", "first"),
            service_ns=("service_ns", "first"),
        )
        .sort_values("start_ns")
        .reset_index(drop=True)
    )
    arrivals = np.sort(requests["arrival_ns"].to_numpy(dtype=np.int64))
    start, service = (
        b["start_ns"].to_numpy(dtype=np.int64),
        b["service_ns"].to_numpy(dtype=np.int64),
    )
    median = b.groupby("size")["service_ns"].transform("median").to_numpy(dtype=np.int64)
    before = np.searchsorted(arrivals, start, side="right")
    end = start + service
    gap = start[1:] - end[:-1]
    responses = np.zeros(len(b), dtype=np.int64)
    responses[1:] = np.where(gap < RESPONSE_WINDOW_NS, b["size"].to_numpy()[:-1], 0)
    ready = b["close_ns"].to_numpy(dtype=np.int64).copy()
    ready[1:] = np.maximum(ready[1:], end[:-1])
    return b.drop(columns="close_ns").assign(
        arrivals=np.searchsorted(arrivals, end, side="left") - before,
        arrivals_fixed=np.searchsorted(arrivals, start + median, side="left") - before,
        responses=responses,
        dispatch_gap_ns=np.maximum(start - ready, 0),
    )


def service_ranks(features: pd.DataFrame) -> np.ndarray:
    """Each batch's quantile rank among the batches of its size, in the order of ``features`` (floats in [0, 1]).

    ``features``: :func:`batch_features` rows (start order). Ties take their
    average rank; a size seen once is at 0.5. Given to
    :func:`research.served.simulate.simulate_served` as ``ranks``, the sequence
    keeps the measured run's slow and fast phases together: independent draws
    spread a slow phase's batches over the whole run.
    """
    if features.empty:
        raise ConfigError("service ranks: no batches")
    by_size = features.groupby("size")["service_ns"]
    rank, count = (
        by_size.rank(method="average").to_numpy(float),
        by_size.transform("size").to_numpy(float),
    )
    return np.where(count > 1, (rank - 1) / np.maximum(count - 1, 1), 0.5)


def fit_contention(runs: Iterable, min_batches: int = 5) -> Contention:
    """Fit the costs over the batches of ``runs`` (each a load or served :class:`~workbench.record.Run`).

    Batch sizes with fewer than ``min_batches`` batches are left out of the
    fit and of ``samples``. Each run's batches are featured separately (their
    arrivals and previous batches are their own).
    """
    frames = [batch_features(r.requests) for r in runs]
    b = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if b.empty:
        raise ConfigError("contention fit: no successful batches in the runs given")
    counts = b["size"].value_counts()
    b = b[b["size"].isin(counts[counts >= min_batches].index)]
    if b.empty:
        raise ConfigError(f"contention fit: no batch size has {min_batches} or more batches")
    sizes = np.sort(b["size"].unique())
    x = np.column_stack(
        [(b["size"].to_numpy() == s).astype(float) for s in sizes]
        + [b["arrivals_fixed"].to_numpy(float), b["responses"].to_numpy(float)]
    )
    coef = np.linalg.lstsq(x, b["service_ns"].to_numpy(float), rcond=None)[0]
    per_arrival, per_response = max(0.0, float(coef[-2])), max(0.0, float(coef[-1]))
    return Contention(
        per_arrival, per_response, without_contention(b, per_arrival, per_response), int(len(b))
    )


def base_ns(features: pd.DataFrame, per_arrival_ns: float, per_response_ns: float) -> np.ndarray:
    """Each :func:`batch_features` row's service time minus the given costs, plus its dispatch gap:
    the executor's time per batch as the simulator takes it (int64 ns, >= 1, in row order)."""
    base = (
        features["service_ns"].to_numpy(float)
        - per_arrival_ns * features["arrivals"].to_numpy(float)
        - per_response_ns * features["responses"].to_numpy(float)
        + features["dispatch_gap_ns"].to_numpy(float)
    )
    return np.maximum(np.rint(base), 1.0).astype(np.int64)  # integer ns, at least 1


def without_contention(
    features: pd.DataFrame, per_arrival_ns: float, per_response_ns: float
) -> dict[int, np.ndarray]:
    """Per batch size, :func:`base_ns` of the :func:`batch_features` rows of that size (int64 ns, row order)."""
    base = base_ns(features, per_arrival_ns, per_response_ns)
    sizes = features["size"].to_numpy()
    return {int(s): base[sizes == s] for s in np.unique(sizes)}
