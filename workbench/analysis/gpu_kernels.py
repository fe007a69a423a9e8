"""GPU kernel figures: how many kernels, how long, how much of the GPU they keep busy.

(GPU kernels, not Jupyter kernels: those are :mod:`workbench.room.kernels`.)
Input: a :class:`~workbench.trace.Trace` (its rows of kind ``kernel``). Kernels on different streams may overlap: ``total_ns`` counts each
kernel's full duration, ``busy_ns`` the length of the union of their intervals.
"""
from __future__ import annotations

import pandas as pd

from ..trace import Trace
from ..trace.intervals import union_length

SHORT_KERNEL_NS = 10_000  # "kernels under 10 us": dur < 10.0 us, strict


def kernel_events(trace: Trace) -> pd.DataFrame:
    """The kernel rows of the trace's events table (same columns)."""
    return trace.kernels.copy(deep=False)


def kernel_summary(trace: Trace) -> dict:
    """``{count, total_ns, busy_ns, under_10us, distinct_names, min_ns, median_ns, max_ns, mean_ns}``.

    ``busy_ns`` and the distribution figures are None without kernels.
    """
    kernels = kernel_events(trace)
    dur = kernels["dur_ns"].to_numpy()
    out = {"count": int(dur.size), "total_ns": int(dur.sum()),
           "under_10us": int((dur < SHORT_KERNEL_NS).sum()),
           "distinct_names": int(kernels["name"].nunique())}
    if dur.size == 0:
        return out | {"busy_ns": None, "min_ns": None, "median_ns": None, "max_ns": None, "mean_ns": None}
    starts = kernels["ts_ns"].to_numpy()
    return out | {"busy_ns": union_length(starts, starts + dur), "min_ns": int(dur.min()),
                  "median_ns": float(pd.Series(dur).median()), "max_ns": int(dur.max()),
                  "mean_ns": float(dur.mean())}


def top_kernels(trace: Trace, n: int | None = 10) -> pd.DataFrame:
    """Kernels grouped by name, largest total first (ties by name).

    Columns: name (str), count, total_ns, mean_ns (float), max_ns, share (of all
    kernel time, 0..1). ``n=None`` keeps every name.
    """
    kernels = kernel_events(trace)
    grouped = (kernels.groupby("name", observed=True, sort=False)["dur_ns"]
               .agg(count="size", total_ns="sum", max_ns="max").reset_index())
    grouped["name"] = grouped["name"].astype(str)
    grouped["mean_ns"] = grouped["total_ns"] / grouped["count"]
    total = grouped["total_ns"].sum()
    grouped["share"] = grouped["total_ns"] / total if total else 0.0
    grouped = grouped.sort_values(["total_ns", "name"], ascending=[False, True], ignore_index=True)
    columns = ["name", "count", "total_ns", "mean_ns", "max_ns", "share"]
    return grouped[columns] if n is None else grouped[columns].head(n)
