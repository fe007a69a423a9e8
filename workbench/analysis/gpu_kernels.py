"""GPU kernel figures: how many kernels, how long, how much of the GPU they keep busy.
(Not Jupyter kernels: those are :mod:`workbench_room.kernel_manager`.)

Kernels on different streams may overlap: ``total_ns`` counts each kernel's duration, ``busy_ns``
the union of their intervals."""

from __future__ import annotations

import numpy as np

from ..trace import KIND_KERNEL, Trace
from ..trace.columns import totals_by_name
from ..trace.intervals import union_length

SHORT_KERNEL_NS = 10_000  # "kernels under 10 us": dur < 10.0 us, strict


def kernel_summary(trace: Trace) -> dict:
    """``{count, total_ns, busy_ns, under_10us, distinct_names, min_ns, median_ns, max_ns,
    mean_ns}``; ``busy_ns`` and the distribution None without kernels."""
    kernels = trace.rows_of([KIND_KERNEL])
    dur = kernels.dur_ns
    out = {
        "count": int(dur.size),
        "total_ns": int(dur.sum()),
        "under_10us": int((dur < SHORT_KERNEL_NS).sum()),
        "distinct_names": int(np.unique(kernels.name.codes).size),
    }
    if dur.size == 0:
        return out | dict.fromkeys(("busy_ns", "min_ns", "median_ns", "max_ns", "mean_ns"))
    starts = kernels.ts_ns
    return out | {
        "busy_ns": union_length(starts, starts + dur),
        "min_ns": int(dur.min()),
        "median_ns": float(np.median(dur)),
        "max_ns": int(dur.max()),
        "mean_ns": float(dur.mean()),
    }


def kernel_rows(trace: Trace, n: int | None = 10) -> list[dict]:
    """Kernels grouped by name, largest total first (ties by name): ``{name, count, total_ns,
    max_ns, mean_ns, share}`` (share of all kernel time, 0..1). ``n=None`` keeps every name."""
    kernels = trace.rows_of([KIND_KERNEL])
    rows = totals_by_name(kernels.name, kernels.dur_ns)
    total = sum(r["total_ns"] for r in rows)
    for r in rows:
        r["mean_ns"] = r["total_ns"] / r["count"]
        r["share"] = r["total_ns"] / total if total else 0.0
    return rows if n is None else rows[:n]
