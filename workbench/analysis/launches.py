"""Kernel launches: each launching runtime call joined to the GPU work it started.

GPU work joins the runtime event with the same ``correlation``. Launch delay and outlier counts
follow Holistic Trace Analysis (HTA): delay ``gpu.ts - (cpu.ts + cpu.dur)`` clipped at 0; runtime
outliers over ``RUNTIME_OUTLIER_NS``, delay outliers over ``LAUNCH_DELAY_OUTLIER_NS``, short
kernels (cpu dur <= 50 us and gpu dur < cpu dur). Graph launches replay many kernels under one
correlation and are counted apart. Cold start (device, context and stream set-up, a kernel's first
launch over ``FIRST_CALL_NS``: :func:`cold_table`) is reported apart; verdicts use the rest."""

from __future__ import annotations

import numpy as np

from ..trace import GPU_WORK_KINDS, KIND_KERNEL, KIND_RUNTIME, KINDS, Trace, derived
from ..trace.columns import Columns, Text, categorical, kinds, nullable, pd
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
    """GPU work (``work``: numpy columns) and per row the index of its launching call in
    ``runtime``, -1 where missing; a correlation shared by several calls joins the first. Computed
    once per trace (:func:`launch_join`)."""

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


PAIR_COLUMNS = (
    "correlation launch_name cpu_ts_ns cpu_dur_ns gpu_kind gpu_name gpu_ts_ns gpu_dur_ns "
    "launch_delay_ns device stream"
).split()


def launch_pairs(trace: Trace, names=HTA_LAUNCH_NAMES) -> pd.DataFrame:
    """One row per GPU event whose launching call is named in ``names`` (HTA's set by default):
    :data:`PAIR_COLUMNS` (text columns categoricals: kernel names run long)."""
    table = pair_table(trace, names)
    join = launch_join(trace)
    rows = table["rows"]
    named = {
        "launch_name": categorical(join.launch_name[rows], join.runtime.name),
        "gpu_kind": kinds(join.work.kind[rows]),
        "gpu_name": categorical(join.work.name.codes[rows], join.work.name),
        "device": nullable(join.work.device[rows]),
        "stream": nullable(join.work.stream[rows]),
    }
    return pd.DataFrame(table | named, columns=PAIR_COLUMNS)


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
    """HTA's counts and ns sums over :func:`launch_pairs` (a DataFrame or :func:`pair_table`);
    ``launch_delay_max_ns`` None without pairs."""
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
    ts_ns, dur_ns, tid, correlation, graph, gpu_count, gpu_dur_ns, launch_delay_ns (to the first GPU
    start, clipped at 0; NA_INT without GPU work)."""
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
    """Initialisation calls and slow first launches, numpy columns sorted by start: name, ts_ns,
    dur_ns, correlation, reason ("init" or "first launch"). An init name counts once, and again when
    over ``FIRST_CALL_NS`` (torch asks ``cudaDeviceGetStreamPriorityRange`` for every stream)."""
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
    """Boolean: the first occurrence of each code."""
    keep = np.zeros(codes.size, bool)
    keep[np.unique(codes, return_index=True)[1]] = True
    return keep


def cold_start_summary(trace: Trace) -> dict:
    """``{calls, dur_ns}`` of :func:`cold_table` (the union of their intervals)."""
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


def steady(table: dict[str, np.ndarray], trace: Trace) -> dict[str, np.ndarray]:
    """A :func:`pair_table` or :func:`call_table` of ``trace`` without its cold-start rows."""
    keep = steady_rows(table["correlation"], trace)
    return {k: v[keep] for k, v in table.items()}


def steady_gpu_dur_ns(trace: Trace) -> int:
    """Summed duration of the GPU work not launched by a cold-start call."""
    work = trace.rows_of(GPU_WORK_KINDS)
    return int(work.dur_ns[steady_rows(work.correlation, trace)].sum())


def launch_summary(calls) -> dict:
    """``{count, total_ns, graph_count, graph_total_ns, graph_gpu_count}`` of :func:`call_table`."""
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
    """Distributions of cpu_dur, launch_delay and gpu_dur over :func:`launch_pairs`: per metric
    count, mean_ns, the :data:`LAUNCH_PERCENTILES` and max_ns (floats; NaN when empty)."""
    return pd.DataFrame(distribution_rows(pairs))


def distribution_rows(pairs) -> list[dict]:
    """:func:`launch_distribution` as dicts."""
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
