"""The workbench's own stage ranges in a trace: what each pipeline stage cost on
the host and what GPU work it launched.

Stage ranges are host events whose name ``workbench.naming.stage_from_range_name``
recognizes (the runner wraps each stage in ``record_function(stage_range_name(s))``).
Work counts for a range when its runtime call starts inside the range on the
same thread (tid). Per stage (all ranges of one name together):

- ``host_ns``: summed range durations; ``gpu_ns``: summed GPU time of the
  kernels, copies and memsets launched inside; ``launch_count``/``launch_ns``:
  kernel and graph launch calls and their CPU time; ``transfer_*``: copies
  launched inside; ``sync_*``: synchronizing calls inside (see
  :data:`~workbench.analysis.transfers.SYNC_CALL_NAMES`).

Flags (rules, shares of the stage's own figures):

- ``launch_bound``: it launches many kernels (>= 10 launch calls per range on
  average) and the GPU work they make lasts < 50 % of its host time: the GPU
  waits while the host dispatches operators and enqueues work. (The host time
  goes to Python and operator dispatch as much as to the launch calls
  themselves: on an H200 a 3-layer encoder at batch 1 spent 18 % of its host
  time in cudaLaunchKernel and kept the GPU 9 % busy.)
- ``transfer_bound``: copies are >= 30 % of the GPU time it launched.
- ``sync_heavy``: synchronizing calls are >= 20 % of its host time.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..naming import stage_from_range_name
from ..trace import KIND_MEMCPY, Trace, derived
from ..trace.schema import name_matches
from .launches import GRAPH_LAUNCH_NAMES, LAUNCH_NAMES, launched_work
from .transfers import SYNC_CALL_NAMES

LAUNCHES_PER_RANGE = 10
GPU_SHARE = 0.5
TRANSFER_SHARE = 0.3
SYNC_SHARE = 0.2
_SUMS = ("host_ns", "gpu_ns", "kernel_count", "launch_count", "launch_ns", "transfer_count",
         "transfer_bytes", "transfer_ns", "sync_count", "sync_ns")


@derived
def stage_ranges(trace: Trace) -> pd.DataFrame:
    """One row per stage range. Columns: stage, ts_ns, dur_ns, pid, tid, and per range
    gpu_ns, kernel_count, launch_count, launch_ns, transfer_count, transfer_bytes,
    transfer_ns, sync_count, sync_ns (sorted by start)."""
    host = trace.host
    rows = host[name_matches(host["name"], lambda n: stage_from_range_name(n) is not None)]
    out = pd.DataFrame({"stage": [stage_from_range_name(n) for n in rows["name"].astype(str)],
                        "ts_ns": rows["ts_ns"].to_numpy(), "dur_ns": rows["dur_ns"].to_numpy(),
                        "pid": rows["pid"].astype(str).to_numpy(), "tid": rows["tid"].astype(str).to_numpy()})
    out = out.sort_values("ts_ns", kind="stable", ignore_index=True)
    work, runtime = launched_work(trace), trace.runtime
    launches = runtime[name_matches(runtime["name"], lambda n: n in LAUNCH_NAMES or n in GRAPH_LAUNCH_NAMES)]
    syncs = runtime[name_matches(runtime["name"], lambda n: n in SYNC_CALL_NAMES)]
    copies = work[work["kind"] == KIND_MEMCPY]
    measures = {
        "gpu_ns": (work, "launch_ts_ns", "dur_ns"), "kernel_count": (work[work["kind"] == "kernel"], "launch_ts_ns", None),
        "launch": (launches, "ts_ns", "dur_ns"), "transfer": (copies, "launch_ts_ns", "dur_ns"),
        "transfer_bytes": (copies, "launch_ts_ns", "bytes"), "sync": (syncs, "ts_ns", "dur_ns")}
    for key, (frame, ts_col, value_col) in measures.items():
        count, total = _inside(out, frame, ts_col, value_col)
        if key in ("launch", "transfer", "sync"):
            out[f"{key}_count"], out[f"{key}_ns"] = count, total
        else:
            out[key] = count if value_col is None else total
    return out


def _inside(ranges: pd.DataFrame, frame: pd.DataFrame, ts_col: str, value_col: str | None):
    """Count and sum of ``value_col`` of rows whose ``ts_col`` lies in each range, same thread."""
    count = np.zeros(len(ranges), np.int64)
    total = np.zeros(len(ranges), np.int64)
    tid_col = "launch_tid" if ts_col == "launch_ts_ns" else "tid"
    threads = frame[tid_col].astype(str).to_numpy()
    for tid in pd.unique(ranges["tid"]):
        mine = ranges["tid"].to_numpy() == tid
        rows = frame[threads == tid]
        ts = rows[ts_col].to_numpy(np.int64)
        order = np.argsort(ts, kind="stable")
        values = np.zeros(len(rows), np.int64) if value_col is None else \
            rows[value_col].astype("Int64").fillna(0).to_numpy(np.int64)
        cum = np.concatenate([[0], np.cumsum(values[order])])
        lo = np.searchsorted(ts[order], ranges.loc[mine, "ts_ns"].to_numpy(), side="left")
        hi = np.searchsorted(ts[order], (ranges.loc[mine, "ts_ns"] + ranges.loc[mine, "dur_ns"]).to_numpy(), side="left")
        count[mine], total[mine] = hi - lo, cum[hi] - cum[lo]
    return count, total


@derived
def trace_stage_summary(trace: Trace) -> pd.DataFrame:
    """Per stage of a *trace* (first appearance order), in ns: count, host_ns,
    host_mean_ns, gpu_ns, kernel_count, launch_count, launch_ns, transfer_count,
    transfer_bytes, transfer_ns, sync_count, sync_ns, launch_bound, transfer_bound,
    sync_heavy. (The per-stage latency summary of a *run*, in ms, is
    :func:`workbench.stage_summary`.)"""
    return summary_of(stage_ranges(trace))


def stage_summary(trace: Trace) -> pd.DataFrame:
    """Deprecated name of :func:`trace_stage_summary` (kept for one release)."""
    warnings.warn("workbench.analysis.trace_stages.stage_summary is now trace_stage_summary "
                  "(workbench.stage_summary summarizes a run)", DeprecationWarning, stacklevel=2)
    return trace_stage_summary(trace)


def summary_of(ranges: pd.DataFrame) -> pd.DataFrame:
    """:func:`trace_stage_summary` of :func:`stage_ranges`."""
    ranges = ranges.rename(columns={"dur_ns": "host_ns"})
    if ranges.empty:
        cols = {"stage": pd.Series([], dtype=str), "count": pd.Series([], dtype=np.int64)}
        cols |= {c: pd.Series([], dtype=np.int64) for c in _SUMS}
        cols |= {"host_mean_ns": pd.Series([], dtype=float)}
        cols |= {f: pd.Series([], dtype=bool) for f in ("launch_bound", "transfer_bound", "sync_heavy")}
        return pd.DataFrame(cols)
    grouped = ranges.groupby("stage", sort=False)
    out = grouped[list(_SUMS)].sum()
    out.insert(0, "count", grouped.size())
    out["host_mean_ns"] = out["host_ns"] / out["count"]
    host = out["host_ns"].clip(lower=1)
    out["launch_bound"] = (out["launch_count"] >= LAUNCHES_PER_RANGE * out["count"]) \
        & (out["gpu_ns"] < GPU_SHARE * host)
    out["transfer_bound"] = (out["transfer_ns"] > 0) & (out["transfer_ns"] >= TRANSFER_SHARE * out["gpu_ns"])
    out["sync_heavy"] = (out["sync_ns"] > 0) & (out["sync_ns"] >= SYNC_SHARE * host)
    return out.reset_index()
