"""Profiler steps: ``ProfilerStep#N`` ranges with the GPU work they launched, and the TensorBoard
profiler plugin's (torch-tb-profiler 0.4.3) step time breakdown. A step's GPU work is the work whose
launch call starts in ``[ts, ts + dur)``. Breakdown: categories in priority order
(:data:`CATEGORIES`) each get the time of their merged intervals not claimed by a higher one;
``other`` is the rest, so they sum to the step. Communication = ``nccl:*``/``gloo:*`` host ops and
their kernels (by External id, or named ``nccl...``). With GPU work a step runs from max(previous
end, its start) to max(its end, the end of the work its calls launched). Without steps the host
range is one step, ``"all"``. Unlike the plugin, ``cuda_runtime``/``cuda_driver`` count as Runtime
and trailing steps with little GPU work are kept."""

from __future__ import annotations

import re

import numpy as np

from ..trace import (
    HOST_KINDS,
    KIND_CPU_OP,
    KIND_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    KIND_PYTHON,
    KIND_RUNTIME,
    KIND_USER_ANNOTATION,
    KINDS,
    Trace,
    derived,
)
from ..trace import intervals as iv
from ..trace.columns import pd, text_frame
from ..trace.numbers import NA_INT
from .launches import launch_join

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec")
_COMM_PREFIXES = ("nccl:", "gloo:")


@derived
def step_table(trace: Trace) -> dict[str, np.ndarray]:
    """One row per host ``ProfilerStep#N`` range by start (numpy columns): step, name, ts_ns,
    dur_ns, ``<kind>_count``/``<kind>_ns`` of the kernels, copies and memsets launched inside."""
    host = trace.rows_of(HOST_KINDS)
    rows = np.flatnonzero(host.name.matches(STEP_NAME.match))
    rows = rows[np.argsort(host.ts_ns[rows], kind="stable")]
    names = host.name.take(rows).values()
    numbers = [int(name[len("ProfilerStep#") :]) for name in names]
    try:
        step = np.array(numbers, dtype=np.int64)
    except OverflowError:  # ProfilerStep#12345678901234567890 is a valid, if odd, name
        step = np.array(numbers, dtype=object)
    steps = {
        "step": step,
        "name": names,
        "ts_ns": host.ts_ns[rows],
        "dur_ns": host.dur_ns[rows],
    }
    join = launch_join(trace)
    launched = join.launched()
    lo, hi = steps["ts_ns"], steps["ts_ns"] + steps["dur_ns"]
    for kind in (KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET):
        mine = launched[join.work.kind[launched] == KINDS.index(kind)]
        count, total = count_and_sum_in(join.launch_ts_ns[mine], join.work.dur_ns[mine], lo, hi)
        steps[f"{kind}_count"], steps[f"{kind}_ns"] = count, total
    return steps


def count_and_sum_in(ts: np.ndarray, values: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """Count and sum of the ``values`` whose ``ts`` lies in each [start, end) (int64 each)."""
    order = np.argsort(ts, kind="stable")
    ts, cum = ts[order], np.concatenate([[0], np.cumsum(values[order])])
    lo = np.searchsorted(ts, starts, side="left")
    hi = np.searchsorted(ts, ends, side="left")
    return (hi - lo).astype(np.int64), (cum[hi] - cum[lo]).astype(np.int64)


def step_boundaries(trace: Trace) -> pd.DataFrame:
    """TensorBoard's step ranges. Columns: step ("N" or "all"), start_ns, end_ns."""
    return text_frame(boundary_table(trace), "step")


@derived
def boundary_table(trace: Trace) -> dict[str, np.ndarray]:
    steps = step_table(trace)
    if steps["ts_ns"].size == 0:
        # the whole trace is one step, bounded by its operators and python (else any host event)
        host = trace.rows_of([KIND_CPU_OP, KIND_PYTHON])
        host = host if len(host) else trace.rows_of(HOST_KINDS)
        if not len(host):
            empty = np.empty(0, np.int64)
            return {"step": np.empty(0, object), "start_ns": empty, "end_ns": empty.copy()}
        labels = np.array(["all"], dtype=object)
        starts = np.array([host.ts_ns.min()])
        ends = np.array([(host.ts_ns + host.dur_ns).max()])
    else:
        labels = np.array([str(s) for s in steps["step"]], dtype=object)
        starts = steps["ts_ns"]
        ends = starts + steps["dur_ns"]
    starts, ends = _device_adjusted(trace, starts, ends)
    return {"step": labels, "start_ns": starts, "end_ns": ends}


def _device_adjusted(trace: Trace, starts: np.ndarray, ends: np.ndarray):
    join = launch_join(trace)
    launched = join.launched()
    l_start = join.launch_ts_ns[launched]
    l_end = l_start + join.launch_dur_ns[launched]
    g_start = join.work.ts_ns[launched]
    g_end = g_start + join.work.dur_ns[launched]
    step_of = np.searchsorted(starts, l_start, side="right") - 1
    inside = (step_of >= 0) & (l_end <= ends[np.maximum(step_of, 0)])
    if not inside.any():
        return starts, ends
    dev_min = np.full(starts.size, np.iinfo(np.int64).max)
    dev_max = np.full(starts.size, np.iinfo(np.int64).min)
    np.minimum.at(dev_min, step_of[inside], g_start[inside])
    np.maximum.at(dev_max, step_of[inside], g_end[inside])
    prev = int(starts[0])
    if dev_min[0] != np.iinfo(np.int64).max:  # unmatched GPU work ending before step 0's first
        early = g_end[~inside & (g_end < dev_min[0])]
        prev = max(prev, int(early.max())) if early.size else prev
    new_starts, new_ends = starts.copy(), ends.copy()
    for i in range(starts.size):
        start = max(prev, int(starts[i]))
        end = max(int(ends[i]), int(dev_max[i]))  # dev_max is int64's minimum without GPU work
        new_starts[i], new_ends[i] = start, max(end, start)
        prev = new_ends[i]
    return new_starts, new_ends


def _role_intervals(trace: Trace) -> dict[str, iv.Intervals]:
    cols = trace.columns
    kind, names = cols.kind, cols.name

    def is_kind(*kinds) -> np.ndarray:
        return np.isin(kind, [KINDS.index(k) for k in kinds])

    host_ops = is_kind(KIND_CPU_OP, KIND_USER_ANNOTATION, KIND_PYTHON)
    comm_host = host_ops & names.matches(lambda n: n.startswith(_COMM_PREFIXES))
    comm_ext = np.unique(cols.ext_id[comm_host & (cols.ext_id != NA_INT)])
    kernels = is_kind(KIND_KERNEL)
    comm_kernel = kernels & (
        np.isin(cols.ext_id, comm_ext) | names.matches(lambda n: n.startswith(("nccl", "rccl")))
    )
    loader = names.matches(
        lambda n: n.startswith("enumerate(DataLoader)#") and n.endswith(".__next__")
    )
    loader |= names.matches(lambda n: n.startswith("enumerate(DataPipe)#"))
    step = names.matches(lambda n: n.startswith("ProfilerStep#"))
    masks = {
        "kernel": kernels & ~comm_kernel,
        "memcpy": is_kind(KIND_MEMCPY),
        "memset": is_kind(KIND_MEMSET),
        "communication": comm_kernel | comm_host,
        "runtime": is_kind(KIND_RUNTIME),
        "dataloader": host_ops & loader,
        "cpu_exec": host_ops & ~loader & ~comm_host & ~step,
    }
    end = cols.ts_ns + cols.dur_ns
    return {role: iv.merge(cols.ts_ns[m], end[m]) for role, m in masks.items()}


def step_breakdown(trace: Trace) -> pd.DataFrame:
    """Per-step time breakdown in ns: step, start_ns, end_ns, ``<category>_ns``, other_ns,
    total_ns (= end - start = the categories' sum)."""
    return text_frame(breakdown_table(trace), "step")


def breakdown_table(trace: Trace) -> dict[str, np.ndarray]:
    out = dict(boundary_table(trace))
    starts, ends = out["start_ns"], out["end_ns"]
    slots = iv.merge(starts, ends)
    for role, intervals in _role_intervals(trace).items():
        claimed = iv.intersect(slots, intervals)
        slots = iv.subtract(slots, claimed)
        out[f"{role}_ns"] = iv.overlap_with_windows(claimed, starts, ends)
    out["other_ns"] = iv.overlap_with_windows(slots, starts, ends)
    out["total_ns"] = ends - starts
    return out
