"""GPU time: span, busy and idle, idle per stream as HTA splits it, busy over time, kernels.

GPU work = kernel, memcpy and memset events; span = first start to last end; busy = the union of
their intervals (streams' overlap once); idle = span - busy. Per stream, the gap before an event
(clipped at 0; HTA sums negative gaps too) is ``host_wait`` when its launch call started after
the previous event ended, else ``kernel_wait`` under :data:`KERNEL_WAIT_NS`, else ``other``; an
event without its launch call is classified by the gap alone."""

from __future__ import annotations

import numpy as np

from ..trace import GPU_WORK_KINDS, KIND_KERNEL, Trace
from ..trace.columns import pd, rows_frame, totals_by_name
from ..trace.intervals import merge, overlap_with_windows, union_length
from ..trace.numbers import NA_INT
from .launches import launch_join

KERNEL_WAIT_NS = 30_000
STREAM_COLUMNS = (
    "device stream count span_ns busy_ns idle_ns host_wait_ns kernel_wait_ns other_ns".split()
)


def gpu_time_summary(trace: Trace) -> dict:
    """``{start_ns, end_ns, span_ns, busy_ns, idle_ns, idle_fraction}``; all None without GPU work."""
    work = trace.rows_of(GPU_WORK_KINDS)
    if not len(work):
        return dict.fromkeys(
            ("start_ns", "end_ns", "span_ns", "busy_ns", "idle_ns", "idle_fraction")
        )
    ends = work.ts_ns + work.dur_ns
    start, end = int(work.ts_ns.min()), int(ends.max())
    busy, span = union_length(work.ts_ns, ends), end - start
    return {
        "start_ns": start,
        "end_ns": end,
        "span_ns": span,
        "busy_ns": busy,
        "idle_ns": span - busy,
        "idle_fraction": (span - busy) / span if span else 0.0,
    }


def stream_idle(trace: Trace, kernel_wait_ns: int = KERNEL_WAIT_NS) -> pd.DataFrame:
    """Idle time per (device, stream): :data:`STREAM_COLUMNS` (idle_ns = the three waits summed)."""
    dtypes = dict.fromkeys(STREAM_COLUMNS[:2], "Int64") | dict.fromkeys(STREAM_COLUMNS[2:], "int64")
    return rows_frame(stream_idle_rows(trace, kernel_wait_ns), dtypes)


def stream_idle_rows(trace: Trace, kernel_wait_ns: int = KERNEL_WAIT_NS) -> list[dict]:
    """:func:`stream_idle` as dicts (None where absent), by device then stream, absent last."""
    join = launch_join(trace)
    work = join.work
    if not len(work):
        return []
    big = np.iinfo(np.int64).max  # absent ids sort last
    device = np.where(work.device == NA_INT, big, work.device)
    stream = np.where(work.stream == NA_INT, big, work.stream)
    order = np.lexsort((work.ts_ns, stream, device))
    rows = []
    keys = np.stack([device[order], stream[order]], axis=1)
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])
    for lo, hi in zip(starts, np.r_[starts[1:], order.size]):
        mine = order[lo:hi]
        dev, strm = (None if v == big else v for v in (int(device[mine[0]]), int(stream[mine[0]])))
        times = work.ts_ns[mine], work.dur_ns[mine], join.launch_ts_ns[mine]
        rows.append(_one_stream(dev, strm, *times, kernel_wait_ns))
    return rows


def _one_stream(
    device, stream, ts: np.ndarray, dur: np.ndarray, launch_ts: np.ndarray, kernel_wait_ns: int
) -> dict:
    end = ts + dur
    prev_end = np.maximum.accumulate(end)[:-1]
    gap = np.maximum(ts[1:] - prev_end, 0)
    launch = np.where(launch_ts == NA_INT, np.iinfo(np.int64).min, launch_ts)[1:]
    host_wait = launch > prev_end  # a missing launch call is never host wait
    kernel_wait = ~host_wait & (gap < kernel_wait_ns)
    other = ~host_wait & ~kernel_wait
    return {
        "device": device,
        "stream": stream,
        "count": int(ts.size),
        "span_ns": int(end.max() - ts.min()),
        "busy_ns": union_length(ts, end),
        "idle_ns": int(gap.sum()),
        "host_wait_ns": int(gap[host_wait].sum()),
        "kernel_wait_ns": int(gap[kernel_wait].sum()),
        "other_ns": int(gap[other].sum()),
    }


def busy_over_time(trace: Trace, bins: int = 200) -> pd.DataFrame:
    """GPU busy time in ``bins`` equal bins over the GPU span: bin_start_ns, bin_end_ns, busy_ns,
    busy_fraction (0..1). Empty without GPU work; one zero-width bin when the span is 0 ns."""
    summary = gpu_time_summary(trace)
    if summary["span_ns"] is None:
        dtypes = dict.fromkeys(("bin_start_ns", "bin_end_ns", "busy_ns"), "int64")
        return rows_frame([], dtypes | {"busy_fraction": float})
    span, steps = summary["span_ns"], np.arange(bins + 1, dtype=np.int64)
    # integer edges (float64 would round epoch-sized ns), split so that span * step cannot overflow
    edges = np.unique(summary["start_ns"] + (span // bins) * steps + (span % bins) * steps // bins)
    if edges.size == 1:  # all GPU work is zero-duration at one instant: one empty bin, not none
        edges = np.repeat(edges, 2)
    work = trace.rows_of(GPU_WORK_KINDS)
    busy = overlap_with_windows(merge(work.ts_ns, work.ts_ns + work.dur_ns), edges[:-1], edges[1:])
    width = np.diff(edges)
    return pd.DataFrame(
        {
            "bin_start_ns": edges[:-1],
            "bin_end_ns": edges[1:],
            "busy_ns": busy,
            "busy_fraction": np.where(width > 0, busy / np.maximum(width, 1), 0.0),
        }
    )


SHORT_KERNEL_NS = 10_000  # "kernels under 10 us": dur < 10.0 us, strict


def kernel_summary(trace: Trace) -> dict:
    """``{count, total_ns, busy_ns, under_10us, distinct_names, min_ns, median_ns, max_ns,
    mean_ns}`` (``total_ns``: each kernel's duration; ``busy_ns``: their union, None without)."""
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
