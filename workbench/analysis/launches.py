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
(:func:`cold_table`), and verdicts are computed over the rest, the steady
state (:func:`steady_launch_pairs`).
"""

from __future__ import annotations

import numpy as np

from ..trace import GPU_WORK_KINDS, KIND_KERNEL, KIND_RUNTIME, KINDS, Trace, derived
from ..trace.columns import Columns, Text
from ..trace.frames import categorical, kinds, nullable, pd
from ..trace.intervals import union_length
from ..trace.numbers import NA_INT
from .stats import percentiles

LAUNCH_NAMES = frozenset(
    """
    cudaLaunchKernel cudaLaunchKernelExC cudaLaunchKernelEx cudaLaunchCooperativeKernel
    cudaLaunchCooperativeKernelMultiDevice
    cuLaunchKernel cuLaunchKernelEx cuLaunchCooperativeKernel
    hipLaunchKernel hipExtLaunchKernel hipModuleLaunchKernel hipExtModuleLaunchKernel
    hipLaunchCooperativeKernel
""".split()
)
GRAPH_LAUNCH_NAMES = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
HTA_LAUNCH_NAMES = frozenset(
    {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync"}
)
INIT_CALL_NAMES = frozenset(
    """
    cudaFree cudaSetDevice cudaInitDevice cudaGetDeviceCount cudaGetDeviceProperties
    cudaDriverGetVersion cudaRuntimeGetVersion cudaDeviceGetStreamPriorityRange cudaStreamCreate
    cudaStreamCreateWithFlags cudaStreamCreateWithPriority
    cuInit cuCtxCreate cuCtxCreate_v2 cuCtxSetCurrent cuDevicePrimaryCtxRetain cuStreamCreate
    cuStreamCreateWithPriority cuModuleLoad cuModuleLoadData cuModuleLoadDataEx
    cuLibraryLoadData
    hipFree hipSetDevice hipInit hipGetDeviceCount hipGetDeviceProperties
    hipGetDevicePropertiesR0600 hipDriverGetVersion hipRuntimeGetVersion
    hipDeviceGetStreamPriorityRange hipStreamCreate hipStreamCreateWithFlags
    hipStreamCreateWithPriority
""".split()
)
# a kernel's first launch this long is cold start (module load, library set-up)
FIRST_CALL_NS = 1_000_000
RUNTIME_OUTLIER_NS = 50_000
LAUNCH_DELAY_OUTLIER_NS = 100_000
LAUNCH_PERCENTILES = (50, 90, 95, 99)  # the launch distributions' columns (HTA's)


class LaunchJoin:
    """GPU work (``work``: numpy columns of the kernel, memcpy and memset rows) and, per row, the index
    of its launching call in ``runtime`` (the runtime rows' columns), -1 where the call is missing.

    A correlation shared by several runtime calls joins to the first of them. Computed once per
    trace (:func:`launch_join`); every launch table is read from it.
    """

    def __init__(self, work: Columns, runtime: Columns, call: np.ndarray):
        self.work, self.runtime, self.call = work, runtime, call
        self.found = call >= 0
        at = np.where(self.found, call, 0)
        empty = runtime.ts_ns.size == 0
        self.launch_ts_ns = np.where(self.found, 0 if empty else runtime.ts_ns[at], NA_INT)
        self.launch_dur_ns = np.where(self.found, 0 if empty else runtime.dur_ns[at], NA_INT)
        self.launch_name = np.where(self.found, -1 if empty else runtime.name.codes[at], -1)
        self.launch_tid = np.where(self.found, -1 if empty else runtime.tid.codes[at], -1)

    def launched(self) -> np.ndarray:
        """Row indices of the work whose launch call is in the trace."""
        return np.flatnonzero(self.found)

    def named(self, names) -> np.ndarray:
        """Boolean per work row: its launch call is named in ``names``."""
        return Text(self.launch_name, self.runtime.name.labels).isin(names)


@derived
def launch_join(trace: Trace) -> LaunchJoin:
    """The :class:`LaunchJoin` of a trace (a sorted lookup on correlation)."""
    work, runtime = trace.rows_of(GPU_WORK_KINDS), trace.rows_of([KIND_RUNTIME])
    rows = np.flatnonzero(runtime.correlation != NA_INT)
    corr, first = np.unique(runtime.correlation[rows], return_index=True)
    pos = np.minimum(np.searchsorted(corr, work.correlation), max(corr.size - 1, 0))
    found = (corr.size > 0) & (work.correlation != NA_INT)
    found = found & (corr[pos] == work.correlation) if corr.size else np.zeros(len(work), bool)
    return LaunchJoin(work, runtime, np.where(found, rows[first][pos] if corr.size else -1, -1))


def launch_pairs(trace: Trace, names=HTA_LAUNCH_NAMES) -> pd.DataFrame:
    """One row per GPU event whose launching call is named in ``names`` (HTA's set by default).

    Columns: correlation, launch_name, cpu_ts_ns, cpu_dur_ns, gpu_kind, gpu_name,
    gpu_ts_ns, gpu_dur_ns, launch_delay_ns (clipped at 0), device, stream (text
    columns categoricals sharing the events table's categories: kernel names run to kilobytes).
    """
    table = pair_table(trace, names)
    join = launch_join(trace)
    rows = table["rows"]
    return pd.DataFrame(
        {
            "correlation": table["correlation"],
            "launch_name": categorical(join.launch_name[rows], join.runtime.name),
            "cpu_ts_ns": table["cpu_ts_ns"],
            "cpu_dur_ns": table["cpu_dur_ns"],
            "gpu_kind": kinds(join.work.kind[rows]),
            "gpu_name": categorical(join.work.name.codes[rows], join.work.name),
            "gpu_ts_ns": table["gpu_ts_ns"],
            "gpu_dur_ns": table["gpu_dur_ns"],
            "launch_delay_ns": table["launch_delay_ns"],
            "device": nullable(join.work.device[rows]),
            "stream": nullable(join.work.stream[rows]),
        }
    )


def pair_table(trace: Trace, names=HTA_LAUNCH_NAMES) -> dict[str, np.ndarray]:
    """:func:`launch_pairs` as numpy columns (``rows``: the work rows of :func:`launch_join`)."""
    return _hta_pairs(trace) if names is HTA_LAUNCH_NAMES else _pairs(trace, names)


@derived
def _hta_pairs(trace: Trace) -> dict[str, np.ndarray]:
    return _pairs(trace, HTA_LAUNCH_NAMES)


def _pairs(trace: Trace, names) -> dict[str, np.ndarray]:
    join = launch_join(trace)
    rows = np.flatnonzero(join.found & join.named(frozenset(names)))
    cpu_ts, cpu_dur = join.launch_ts_ns[rows], join.launch_dur_ns[rows]
    gpu_ts, gpu_dur = join.work.ts_ns[rows], join.work.dur_ns[rows]
    return {
        "rows": rows,
        "correlation": join.work.correlation[rows],
        "cpu_ts_ns": cpu_ts,
        "cpu_dur_ns": cpu_dur,
        "gpu_ts_ns": gpu_ts,
        "gpu_dur_ns": gpu_dur,
        "launch_delay_ns": np.maximum(gpu_ts - (cpu_ts + cpu_dur), 0).astype(np.int64),
    }


def launch_pair_summary(pairs) -> dict:
    """HTA's counts over :func:`launch_pairs` (a DataFrame or :func:`pair_table`): ``{count,
    cpu_over_50us, delay_over_100us, gpu_shorter_than_cpu, short_kernels, cpu_dur_ns, gpu_dur_ns,
    launch_delay_ns, launch_delay_max_ns}`` (sums in ns; max None without pairs)."""
    cpu, gpu, delay = (
        np.asarray(pairs[c], dtype=np.int64)
        for c in ("cpu_dur_ns", "gpu_dur_ns", "launch_delay_ns")
    )
    return {
        "count": int(cpu.size),
        "cpu_over_50us": int((cpu > RUNTIME_OUTLIER_NS).sum()),
        "delay_over_100us": int((delay > LAUNCH_DELAY_OUTLIER_NS).sum()),
        "gpu_shorter_than_cpu": int((gpu < cpu).sum()),
        "short_kernels": int(((cpu <= RUNTIME_OUTLIER_NS) & (gpu < cpu)).sum()),
        "cpu_dur_ns": int(cpu.sum()),
        "gpu_dur_ns": int(gpu.sum()),
        "launch_delay_ns": int(delay.sum()),
        "launch_delay_max_ns": int(delay.max()) if delay.size else None,
    }


@derived
def call_table(trace: Trace) -> dict[str, np.ndarray]:
    """Every kernel or graph launch call with the GPU work it started, as numpy columns: name,
    ts_ns, dur_ns, tid (name and tid object arrays of str), correlation, graph (bool), gpu_count,
    gpu_dur_ns (sum of its GPU work), launch_delay_ns (first GPU start after the call's end,
    clipped at 0; NA_INT without GPU work)."""
    join = launch_join(trace)
    runtime = join.runtime
    rows = np.flatnonzero(runtime.name.isin(LAUNCH_NAMES | GRAPH_LAUNCH_NAMES))
    corr = runtime.correlation[rows]
    launched = join.launched()
    work_corr = join.work.correlation[launched]
    keys, inverse = np.unique(work_corr, return_inverse=True)
    count = np.bincount(inverse.reshape(-1), minlength=keys.size).astype(np.int64)
    total = np.zeros(keys.size, np.int64)
    np.add.at(total, inverse, join.work.dur_ns[launched])
    first = np.full(keys.size, np.iinfo(np.int64).max)
    np.minimum.at(first, inverse, join.work.ts_ns[launched])
    pos = np.minimum(np.searchsorted(keys, corr), max(keys.size - 1, 0))
    hit = (corr != NA_INT) & (keys[pos] == corr) if keys.size else np.zeros(rows.size, bool)
    ts, dur = runtime.ts_ns[rows], runtime.dur_ns[rows]
    names = runtime.name.take(rows).values()
    delay = np.where(hit, np.maximum(first[pos] - (ts + dur), 0) if keys.size else 0, NA_INT)
    return {
        "name": names,
        "ts_ns": ts,
        "dur_ns": dur,
        "tid": runtime.tid.take(rows).values(),
        "correlation": corr,
        "graph": np.isin(names, list(GRAPH_LAUNCH_NAMES)) if rows.size else np.zeros(0, bool),
        "gpu_count": np.where(hit, count[pos] if keys.size else 0, 0).astype(np.int64),
        "gpu_dur_ns": np.where(hit, total[pos] if keys.size else 0, 0).astype(np.int64),
        "launch_delay_ns": delay.astype(np.int64),
    }


@derived
def cold_table(trace: Trace) -> dict[str, np.ndarray]:
    """Initialisation calls and slow first launches: the first call of each name in ``INIT_CALL_NAMES``
    (and any later one over ``FIRST_CALL_NS``: torch asks ``cudaDeviceGetStreamPriorityRange`` for
    every stream, in a microsecond once the context exists), and the first launch of each kernel
    when it takes over ``FIRST_CALL_NS``. Numpy columns, sorted by start: name (object), ts_ns,
    dur_ns, correlation (NA_INT when absent), reason ("init" or "first launch")."""
    join = launch_join(trace)
    runtime = join.runtime
    init = np.flatnonzero(runtime.name.isin(INIT_CALL_NAMES))
    init = init[np.argsort(runtime.ts_ns[init], kind="stable")]
    init = init[_first_of_each(runtime.name.codes[init]) | (runtime.dur_ns[init] >= FIRST_CALL_NS)]
    kernels = np.flatnonzero(
        join.found & (join.work.kind == KINDS.index(KIND_KERNEL)) & join.named(LAUNCH_NAMES)
    )
    kernels = kernels[np.argsort(join.launch_ts_ns[kernels], kind="stable")]
    first = kernels[_first_of_each(join.work.name.codes[kernels])]
    first = first[join.launch_dur_ns[first] >= FIRST_CALL_NS]
    parts = {  # the init calls, then the first launches
        "name": (runtime.name.take(init).values(), runtime.name.take(join.call[first]).values()),
        "ts_ns": (runtime.ts_ns[init], join.launch_ts_ns[first]),
        "dur_ns": (runtime.dur_ns[init], join.launch_dur_ns[first]),
        "correlation": (runtime.correlation[init], join.work.correlation[first]),
        "reason": (np.full(init.size, "init", object), np.full(first.size, "first launch", object)),
    }
    order = np.argsort(np.concatenate(parts["ts_ns"]), kind="stable")
    return {k: np.concatenate(v)[order] for k, v in parts.items()}


def _first_of_each(codes: np.ndarray) -> np.ndarray:
    """Boolean: the first occurrence of each code (in the given order)."""
    keep = np.zeros(codes.size, bool)
    keep[np.unique(codes, return_index=True)[1]] = True
    return keep


def cold_start_summary(trace: Trace) -> dict:
    """``{calls, dur_ns}`` of :func:`cold_table` (the union of their intervals: nested calls
    count once)."""
    cold = cold_table(trace)
    return {
        "calls": int(cold["ts_ns"].size),
        "dur_ns": union_length(cold["ts_ns"], cold["ts_ns"] + cold["dur_ns"]),
    }


def steady_rows(correlation: np.ndarray, trace: Trace) -> np.ndarray:
    """Boolean per row: not started by a cold-start call (matched on correlation)."""
    cold = cold_table(trace)["correlation"]
    cold = cold[cold != NA_INT]
    return ~np.isin(correlation, cold) if cold.size else np.ones(np.asarray(correlation).size, bool)


def steady_launch_pairs(trace: Trace) -> pd.DataFrame:
    """:func:`launch_pairs` (HTA's names) without the pairs of cold-start calls."""
    pairs = launch_pairs(trace)
    return pairs[steady_rows(pairs["correlation"].to_numpy(np.int64, na_value=NA_INT), trace)]


def _steady(table: dict[str, np.ndarray], trace: Trace) -> dict[str, np.ndarray]:
    keep = steady_rows(table["correlation"], trace)
    return {k: v[keep] for k, v in table.items()}


def steady_pair_table(trace: Trace) -> dict[str, np.ndarray]:
    """:func:`steady_launch_pairs` as numpy columns."""
    return _steady(pair_table(trace), trace)


def steady_call_table(trace: Trace) -> dict[str, np.ndarray]:
    """:func:`call_table` without cold-start calls."""
    return _steady(call_table(trace), trace)


def steady_gpu_dur_ns(trace: Trace) -> int:
    """Summed duration of the GPU work not launched by a cold-start call."""
    work = trace.rows_of(GPU_WORK_KINDS)
    return int(work.dur_ns[steady_rows(work.correlation, trace)].sum())


def launch_summary(calls) -> dict:
    """``{count, total_ns, graph_count, graph_total_ns, graph_gpu_count}`` of :func:`call_table`
    (or a table of its columns): kernel launch calls and graph launches apart."""
    graph = np.asarray(calls["graph"], dtype=bool)
    dur = np.asarray(calls["dur_ns"], dtype=np.int64)
    gpu_count = np.asarray(calls["gpu_count"], dtype=np.int64)
    return {
        "count": int((~graph).sum()),
        "total_ns": int(dur[~graph].sum()),
        "graph_count": int(graph.sum()),
        "graph_total_ns": int(dur[graph].sum()),
        "graph_gpu_count": int(gpu_count[graph].sum()),
    }


def launch_distribution(pairs) -> pd.DataFrame:
    """Distributions of CPU launch time, launch delay and GPU time over :func:`launch_pairs`.

    One row per metric (cpu_dur, launch_delay, gpu_dur); columns: metric, count,
    mean_ns, p50_ns, p90_ns, p95_ns, p99_ns, max_ns (floats; NaN when empty).
    """
    return pd.DataFrame(distribution_rows(pairs))


def distribution_rows(pairs) -> list[dict]:
    """The rows of :func:`launch_distribution` as dicts (``pairs``: a DataFrame or :func:`pair_table`)."""
    columns = ["mean_ns", *(f"p{p}_ns" for p in LAUNCH_PERCENTILES), "max_ns"]
    rows = []
    for metric in ("cpu_dur", "launch_delay", "gpu_dur"):
        values = np.asarray(pairs[f"{metric}_ns"], dtype=np.int64)
        stats = [np.nan] * len(columns)
        if values.size:
            stats = [values.mean(), *percentiles(values, LAUNCH_PERCENTILES), values.max()]
        row = {"metric": metric, "count": int(values.size)}
        rows.append(row | {k: float(v) for k, v in zip(columns, stats)})
    return rows
