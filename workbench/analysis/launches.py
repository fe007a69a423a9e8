"""Kernel launches: each launching runtime call joined to the GPU work it started.

GPU work (kernels, copies, memsets) is joined to the runtime-category event with
the same ``correlation`` (``cuda_sync`` events are not runtime calls). Launch
delay follows Holistic Trace Analysis: ``gpu.ts - (cpu.ts + cpu.dur)``, clipped
at 0. HTA's outlier counts: runtime outliers (cpu dur > 50 us), launch delay
outliers (> 100 us), short kernels (cpu dur <= 50 us and gpu dur < cpu dur).
Graph launches (``cudaGraphLaunch``...) replay many kernels under one
correlation and are counted apart from launch calls.

Cold start: the first runtime calls that set up the device, context and streams
(``INIT_CALL_NAMES``: ``cudaFree``, ``cudaStreamCreate*``,
``cudaDeviceGetStreamPriorityRange``...) and the first launch of a kernel that
takes over ``FIRST_CALL_NS`` (1 ms: module loading or library set-up; a
steady launch call takes microseconds). They are reported apart
(:func:`cold_start_calls`), and verdicts are computed over the rest, the steady
state (:func:`steady_launch_pairs`): on the AlexNet trace one first launch took
3,056 ms and context set-up 36 s of a 43 s host span.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import KIND_KERNEL, Trace, derived
from ..trace.intervals import union_length
from .stats import percentiles

LAUNCH_NAMES = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchKernelEx", "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice", "cuLaunchKernel", "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel", "hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel",
    "hipExtModuleLaunchKernel", "hipLaunchCooperativeKernel"})
GRAPH_LAUNCH_NAMES = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
HTA_LAUNCH_NAMES = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"})
INIT_CALL_NAMES = frozenset({
    "cudaFree", "cudaSetDevice", "cudaInitDevice", "cudaGetDeviceCount", "cudaGetDeviceProperties",
    "cudaDriverGetVersion", "cudaRuntimeGetVersion", "cudaDeviceGetStreamPriorityRange", "cudaStreamCreate",
    "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
    "cuInit", "cuCtxCreate", "cuCtxCreate_v2", "cuCtxSetCurrent", "cuDevicePrimaryCtxRetain", "cuStreamCreate",
    "cuStreamCreateWithPriority", "cuModuleLoad", "cuModuleLoadData", "cuModuleLoadDataEx", "cuLibraryLoadData",
    "hipFree", "hipSetDevice", "hipInit", "hipGetDeviceCount", "hipGetDeviceProperties", "hipGetDevicePropertiesR0600",
    "hipDriverGetVersion", "hipRuntimeGetVersion", "hipDeviceGetStreamPriorityRange", "hipStreamCreate",
    "hipStreamCreateWithFlags", "hipStreamCreateWithPriority"})
FIRST_CALL_NS = 1_000_000  # a kernel's first launch this long is cold start (module load, library set-up)
RUNTIME_OUTLIER_NS = 50_000
LAUNCH_DELAY_OUTLIER_NS = 100_000
LAUNCH_PERCENTILES = (50, 90, 95, 99)  # the launch distributions' columns (HTA's)


def runtime_calls(trace: Trace, names=None) -> pd.DataFrame:
    """Runtime-category rows, optionally only those whose name is in ``names``."""
    runtime = trace.runtime
    return runtime.copy(deep=False) if names is None else runtime[runtime["name"].isin(list(names))]


@derived
def gpu_work_with_launch(trace: Trace) -> pd.DataFrame:
    """GPU work rows with their launching runtime call (null where it is missing).

    Columns: kind, name, ts_ns, dur_ns, device, stream, correlation, bytes,
    ext_id, launch_name (NA without a call), launch_ts_ns, launch_dur_ns (Int64),
    launch_tid. Text columns are categoricals sharing the events table's
    categories (no string is copied: kernel names run to kilobytes).
    A correlation shared by several runtime calls joins to the first of them
    (an index lookup on correlation). Computed once per :class:`~workbench.trace.Trace`.
    """
    gpu, runtime = trace.gpu_work, trace.runtime
    runtime = runtime[runtime["correlation"].notna().to_numpy()]
    corr = runtime["correlation"].to_numpy(np.int64)
    first = ~pd.Index(corr).duplicated(keep="first")
    runtime = runtime[first]
    pos = pd.Index(corr[first]).get_indexer(pd.Index(gpu["correlation"].array))
    found = pos >= 0
    at = np.where(found, pos, 0)

    def pick(column: str):  # categorical column of the runtime rows, NA where no call
        codes = runtime[column].cat.codes.to_numpy()
        picked = np.where(found, codes[at] if codes.size else -1, -1)
        return pd.Categorical.from_codes(picked, dtype=runtime[column].dtype)

    def times(column: str):  # nullable before any arithmetic: float64 would round epoch-sized ns
        values = runtime[column].to_numpy(np.int64)
        return pd.arrays.IntegerArray(values[at] if values.size else np.zeros(at.size, np.int64), ~found)

    out = {"kind": gpu["kind"].array, "name": gpu["name"].array,
           **{c: gpu[c].array for c in ("ts_ns", "dur_ns", "device", "stream", "correlation", "bytes", "ext_id")},
           "launch_name": pick("name"), "launch_ts_ns": times("ts_ns"), "launch_dur_ns": times("dur_ns"),
           "launch_tid": pick("tid")}
    return pd.DataFrame(out)


@derived
def launched_work(trace: Trace) -> pd.DataFrame:
    """The rows of :func:`gpu_work_with_launch` whose launch call is in the trace."""
    joined = gpu_work_with_launch(trace)
    return joined[joined["launch_ts_ns"].notna().to_numpy()]


def launch_pairs(trace: Trace, names=HTA_LAUNCH_NAMES) -> pd.DataFrame:
    """One row per GPU event whose launching call is named in ``names`` (HTA's set by default).

    Columns: correlation, launch_name, cpu_ts_ns, cpu_dur_ns, gpu_kind, gpu_name,
    gpu_ts_ns, gpu_dur_ns, launch_delay_ns (clipped at 0), device, stream (text
    columns categorical, as in :func:`gpu_work_with_launch`).
    """
    return _hta_pairs(trace) if names is HTA_LAUNCH_NAMES else _pairs(trace, names)


@derived
def _hta_pairs(trace: Trace) -> pd.DataFrame:
    return _pairs(trace, HTA_LAUNCH_NAMES)


def _pairs(trace: Trace, names) -> pd.DataFrame:
    joined = launched_work(trace)
    joined = joined[joined["launch_name"].isin(list(names)).to_numpy()]
    cpu_end = joined["launch_ts_ns"].to_numpy(np.int64) + joined["launch_dur_ns"].to_numpy(np.int64)
    delay = np.maximum(joined["ts_ns"].to_numpy() - cpu_end, 0)
    return pd.DataFrame({
        "correlation": joined["correlation"].to_numpy(), "launch_name": joined["launch_name"].array,
        "cpu_ts_ns": joined["launch_ts_ns"].to_numpy(np.int64),
        "cpu_dur_ns": joined["launch_dur_ns"].to_numpy(np.int64),
        "gpu_kind": joined["kind"].array, "gpu_name": joined["name"].array,
        "gpu_ts_ns": joined["ts_ns"].to_numpy(), "gpu_dur_ns": joined["dur_ns"].to_numpy(),
        "launch_delay_ns": delay.astype(np.int64),
        "device": joined["device"].array, "stream": joined["stream"].array})


def launch_pair_summary(pairs: pd.DataFrame) -> dict:
    """HTA's counts over :func:`launch_pairs`: ``{count, cpu_over_50us, delay_over_100us,
    gpu_shorter_than_cpu, short_kernels, cpu_dur_ns, gpu_dur_ns, launch_delay_ns,
    launch_delay_max_ns}`` (sums in ns; max None without pairs)."""
    cpu, gpu, delay = (pairs[c].to_numpy() for c in ("cpu_dur_ns", "gpu_dur_ns", "launch_delay_ns"))
    return {"count": int(cpu.size), "cpu_over_50us": int((cpu > RUNTIME_OUTLIER_NS).sum()),
            "delay_over_100us": int((delay > LAUNCH_DELAY_OUTLIER_NS).sum()),
            "gpu_shorter_than_cpu": int((gpu < cpu).sum()),
            "short_kernels": int(((cpu <= RUNTIME_OUTLIER_NS) & (gpu < cpu)).sum()),
            "cpu_dur_ns": int(cpu.sum()), "gpu_dur_ns": int(gpu.sum()), "launch_delay_ns": int(delay.sum()),
            "launch_delay_max_ns": int(delay.max()) if delay.size else None}


@derived
def launch_calls(trace: Trace) -> pd.DataFrame:
    """Every kernel or graph launch call with the GPU work it started.

    Columns: name, ts_ns, dur_ns, tid, correlation, graph (bool), gpu_count,
    gpu_dur_ns (sum of its GPU work), launch_delay_ns (first GPU start after
    the call's end, clipped at 0; NA without GPU work).
    """
    calls = runtime_calls(trace, LAUNCH_NAMES | GRAPH_LAUNCH_NAMES)
    gpu = launched_work(trace)
    per_corr = gpu.groupby("correlation").agg(gpu_count=("dur_ns", "size"), gpu_dur_ns=("dur_ns", "sum"),
                                              first_gpu_ts_ns=("ts_ns", "min")).astype("Int64")
    out = pd.DataFrame({"name": calls["name"].astype(str).to_numpy(), "ts_ns": calls["ts_ns"].to_numpy(),
                        "dur_ns": calls["dur_ns"].to_numpy(), "tid": calls["tid"].astype(str).to_numpy(),
                        "correlation": calls["correlation"].array})
    out["graph"] = out["name"].isin(list(GRAPH_LAUNCH_NAMES))
    out = out.merge(per_corr, left_on="correlation", right_index=True, how="left")
    out["gpu_count"] = out["gpu_count"].fillna(0).astype(np.int64)
    out["gpu_dur_ns"] = out["gpu_dur_ns"].fillna(0).astype(np.int64)
    delay = out["first_gpu_ts_ns"] - (out["ts_ns"] + out["dur_ns"])
    out["launch_delay_ns"] = delay.clip(lower=0).astype("Int64")
    return out.drop(columns="first_gpu_ts_ns").reset_index(drop=True)


@derived
def cold_start_calls(trace: Trace) -> pd.DataFrame:
    """Initialisation calls and slow first launches: the first call of each name in ``INIT_CALL_NAMES``
    (and any later one over ``FIRST_CALL_NS``: torch asks ``cudaDeviceGetStreamPriorityRange`` for
    every stream, in a microsecond once the context exists), and the first launch of each kernel
    when it takes over ``FIRST_CALL_NS``.

    Columns: name (str), ts_ns, dur_ns, correlation (Int64), reason ("init" or "first launch");
    sorted by start.
    """
    runtime = trace.runtime
    init = runtime[runtime["name"].isin(list(INIT_CALL_NAMES)).to_numpy()].sort_values("ts_ns", kind="stable")
    init = init[(~init["name"].duplicated() | (init["dur_ns"] >= FIRST_CALL_NS)).to_numpy()]
    work = launched_work(trace)
    kernels = work[(work["kind"] == KIND_KERNEL).to_numpy() & work["launch_name"].isin(list(LAUNCH_NAMES)).to_numpy()]
    kernels = kernels.sort_values("launch_ts_ns", kind="stable")
    first = kernels[~kernels["name"].duplicated().to_numpy()]
    first = first[(first["launch_dur_ns"] >= FIRST_CALL_NS).to_numpy()]
    out = pd.concat([
        pd.DataFrame({"name": init["name"].astype(str).to_numpy(), "ts_ns": init["ts_ns"].to_numpy(),
                      "dur_ns": init["dur_ns"].to_numpy(), "correlation": init["correlation"].array, "reason": "init"}),
        pd.DataFrame({"name": first["launch_name"].astype(str).to_numpy(),
                      "ts_ns": first["launch_ts_ns"].to_numpy(np.int64), "dur_ns": first["launch_dur_ns"].to_numpy(np.int64),
                      "correlation": first["correlation"].array, "reason": "first launch"})], ignore_index=True)
    out = out.astype({"name": str, "ts_ns": np.int64, "dur_ns": np.int64, "correlation": "Int64", "reason": str})
    return out.sort_values("ts_ns", kind="stable", ignore_index=True)


def cold_start_summary(trace: Trace) -> dict:
    """``{calls, dur_ns}`` of :func:`cold_start_calls` (the union of their intervals: nested calls count once)."""
    cold = cold_start_calls(trace)
    starts = cold["ts_ns"].to_numpy()
    return {"calls": len(cold), "dur_ns": union_length(starts, starts + cold["dur_ns"].to_numpy())}


def _cold_correlations(trace: Trace) -> np.ndarray:
    corr = cold_start_calls(trace)["correlation"]
    return corr[corr.notna()].to_numpy(np.int64)


def _steady(frame: pd.DataFrame, trace: Trace) -> pd.DataFrame:
    """The rows of ``frame`` not started by a cold-start call (matched on correlation)."""
    cold = _cold_correlations(trace)
    return frame if cold.size == 0 else frame[~frame["correlation"].isin(cold).fillna(False).to_numpy(bool)]


def steady_launch_pairs(trace: Trace) -> pd.DataFrame:
    """:func:`launch_pairs` (HTA's names) without the pairs of cold-start calls."""
    return _steady(launch_pairs(trace), trace)


def steady_launch_calls(trace: Trace) -> pd.DataFrame:
    """:func:`launch_calls` without cold-start calls."""
    return _steady(launch_calls(trace), trace)


def steady_gpu_work(trace: Trace) -> pd.DataFrame:
    """GPU work rows not launched by a cold-start call."""
    return _steady(trace.gpu_work, trace)


def launch_summary(calls: pd.DataFrame) -> dict:
    """``{count, total_ns, graph_count, graph_total_ns, graph_gpu_count}`` of :func:`launch_calls`:
    kernel launch calls and graph launches apart."""
    graph = calls[calls["graph"]]
    plain = calls[~calls["graph"]]
    return {"count": len(plain), "total_ns": int(plain["dur_ns"].sum()), "graph_count": len(graph),
            "graph_total_ns": int(graph["dur_ns"].sum()), "graph_gpu_count": int(graph["gpu_count"].sum())}


def launch_distribution(pairs: pd.DataFrame) -> pd.DataFrame:
    """Distributions of CPU launch time, launch delay and GPU time over :func:`launch_pairs`.

    One row per metric (cpu_dur, launch_delay, gpu_dur); columns: metric, count,
    mean_ns, p50_ns, p90_ns, p95_ns, p99_ns, max_ns (floats; NaN when empty).
    """
    rows = []
    for metric in ("cpu_dur", "launch_delay", "gpu_dur"):
        values = pairs[f"{metric}_ns"].to_numpy(np.int64)
        row = {"metric": metric, "count": int(values.size)}
        empty = values.size == 0
        row["mean_ns"] = np.nan if empty else float(values.mean())
        for p, v in zip(LAUNCH_PERCENTILES, [np.nan] * 4 if empty else percentiles(values, LAUNCH_PERCENTILES)):
            row[f"p{p}_ns"] = float(v)
        row["max_ns"] = np.nan if empty else float(values.max())
        rows.append(row)
    return pd.DataFrame(rows)
