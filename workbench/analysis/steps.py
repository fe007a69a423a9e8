"""Profiler steps: ``ProfilerStep#N`` ranges with the GPU work they launched, and the
step time breakdown of the TensorBoard profiler plugin (torch-tb-profiler 0.4.3).

Steps are host events (not ``gpu_user_annotation`` copies) named exactly
``ProfilerStep#N``, sorted by start. A step's GPU work is the kernels, copies and
memsets whose launching runtime call starts in ``[ts, ts + dur)``, even when the
work ends after the step.

Breakdown (TensorBoard's rule): categories in priority order Kernel > Memcpy >
Memset > Communication > Runtime > DataLoader > CPU Exec; each gets the time of
its merged intervals not already claimed by a higher one; Other is the rest, so
the categories sum to the step's time. Communication = kernels of ``nccl:*``/
``gloo:*`` ops (matched by External id, or kernels named ``nccl...``) plus those
host ops. Step boundaries: with GPU work, a step starts at max(previous step end,
its host start) and ends at max(its host end, the end of the GPU work launched
by runtime calls lying wholly inside it). Without steps the whole host range is
one step, ``"all"``. Differences from the plugin: ``cuda_runtime``/``cuda_driver``
count as Runtime (its last release ignores them), and trailing steps that
launched little GPU work are kept (the plugin drops them): every step is listed.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace import (KIND_CPU_OP, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_PYTHON,
                     KIND_RUNTIME, KIND_USER_ANNOTATION, Trace, derived)
from ..trace import intervals as iv
from ..trace.schema import name_matches
from .launches import launched_work

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec")
_COMM_PREFIXES = ("nccl:", "gloo:")


@derived
def profiler_steps(trace: Trace) -> pd.DataFrame:
    """One row per host ``ProfilerStep#N`` range, sorted by start.

    Columns: step (int), name, ts_ns, dur_ns, and for kernel/memcpy/memset the
    ``<kind>_count`` and ``<kind>_ns`` (summed GPU duration) of the work whose
    launch call starts inside the step.
    """
    host = trace.host
    rows = host[name_matches(host["name"], STEP_NAME.match)]
    names = rows["name"].astype(str)
    steps = pd.DataFrame({"step": _step_numbers(names),
                          "name": names.to_numpy(),
                          "ts_ns": rows["ts_ns"].to_numpy(), "dur_ns": rows["dur_ns"].to_numpy()})
    steps = steps.sort_values("ts_ns", kind="stable", ignore_index=True)
    work = launched_work(trace)
    for kind in (KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET):
        count, total = _launched_in(work[work["kind"] == kind], steps["ts_ns"], steps["ts_ns"] + steps["dur_ns"])
        steps[f"{kind}_count"], steps[f"{kind}_ns"] = count, total
    return steps


def _step_numbers(names: pd.Series) -> np.ndarray:
    """The N of each ``ProfilerStep#N``: int64, or Python ints (object) when one is past int64."""
    numbers = [int(name[len("ProfilerStep#"):]) for name in names]
    try:
        return np.array(numbers, dtype=np.int64)
    except OverflowError:  # ProfilerStep#12345678901234567890 is a valid, if odd, name
        return np.array(numbers, dtype=object)


def _launched_in(work: pd.DataFrame, starts: pd.Series, ends: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Count and summed duration of work whose launch starts in each [start, end)."""
    order = np.argsort(work["launch_ts_ns"].to_numpy(np.int64), kind="stable")
    launch = work["launch_ts_ns"].to_numpy(np.int64)[order]
    cum = np.concatenate([[0], np.cumsum(work["dur_ns"].to_numpy()[order])])
    lo = np.searchsorted(launch, starts.to_numpy(), side="left")
    hi = np.searchsorted(launch, ends.to_numpy(), side="left")
    return (hi - lo).astype(np.int64), (cum[hi] - cum[lo]).astype(np.int64)


@derived
def step_boundaries(trace: Trace) -> pd.DataFrame:
    """TensorBoard's step ranges. Columns: step ("N" or "all"), start_ns, end_ns."""
    steps = profiler_steps(trace)
    if steps.empty:
        host = _tb_host(trace)
        if host.empty:
            return pd.DataFrame({"step": pd.Series([], dtype=str), "start_ns": np.empty(0, np.int64),
                                 "end_ns": np.empty(0, np.int64)})
        labels = ["all"]
        starts = np.array([host["ts_ns"].min()])
        ends = np.array([(host["ts_ns"] + host["dur_ns"]).max()])
    else:
        labels = steps["step"].astype(str).tolist()
        starts = steps["ts_ns"].to_numpy()
        ends = starts + steps["dur_ns"].to_numpy()
    starts, ends = _device_adjusted(trace, starts, ends)
    return pd.DataFrame({"step": pd.Series(labels, dtype=str), "start_ns": starts, "end_ns": ends})


def _tb_host(trace: Trace) -> pd.DataFrame:
    """Host events bounding a trace without steps: operators and python (all host events if none)."""
    host = trace.host[trace.host["kind"].isin([KIND_CPU_OP, KIND_PYTHON]).to_numpy()]
    return host if not host.empty else trace.host


def _device_adjusted(trace: Trace, starts: np.ndarray, ends: np.ndarray):
    work = launched_work(trace)
    l_start = work["launch_ts_ns"].to_numpy(np.int64)
    l_end = l_start + work["launch_dur_ns"].to_numpy(np.int64)
    g_start = work["ts_ns"].to_numpy()
    g_end = g_start + work["dur_ns"].to_numpy()
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
        end = int(ends[i]) if dev_max[i] == np.iinfo(np.int64).min else max(int(ends[i]), int(dev_max[i]))
        new_starts[i], new_ends[i] = start, max(end, start)
        prev = new_ends[i]
    return new_starts, new_ends


def _role_intervals(events: pd.DataFrame) -> dict[str, iv.Intervals]:
    kind = events["kind"]
    names = events["name"]
    comm_host = kind.isin([KIND_CPU_OP, KIND_USER_ANNOTATION, KIND_PYTHON]) & _starts_with(names, _COMM_PREFIXES)
    comm_ext = set(events.loc[comm_host, "ext_id"].dropna().tolist())
    kernels = kind == KIND_KERNEL
    comm_kernel = kernels & (events["ext_id"].isin(comm_ext) | _starts_with(names, ("nccl", "rccl")))
    loader = _starts_with(names, ("enumerate(DataLoader)#",)) & _ends_with(names, ".__next__")
    loader |= _starts_with(names, ("enumerate(DataPipe)#",))
    host_ops = kind.isin([KIND_CPU_OP, KIND_USER_ANNOTATION, KIND_PYTHON])
    step = _starts_with(names, ("ProfilerStep#",))
    masks = {"kernel": kernels & ~comm_kernel, "memcpy": kind == KIND_MEMCPY, "memset": kind == KIND_MEMSET,
             "communication": comm_kernel | comm_host, "runtime": kind == KIND_RUNTIME,
             "dataloader": host_ops & loader, "cpu_exec": host_ops & ~loader & ~comm_host & ~step}
    ts = events["ts_ns"].to_numpy()
    end = ts + events["dur_ns"].to_numpy()
    return {role: iv.merge(ts[m.to_numpy()], end[m.to_numpy()]) for role, m in masks.items()}


def _starts_with(names: pd.Series, prefixes) -> pd.Series:
    return pd.Series(name_matches(names, lambda n: n.startswith(prefixes)), index=names.index)


def _ends_with(names: pd.Series, suffix: str) -> pd.Series:
    return pd.Series(name_matches(names, lambda n: n.endswith(suffix)), index=names.index)


def step_breakdown(trace: Trace) -> pd.DataFrame:
    """Per-step time breakdown (TensorBoard plugin's priority rule), in ns.

    Columns: step ("N" or "all"), start_ns, end_ns, kernel_ns, memcpy_ns,
    memset_ns, communication_ns, runtime_ns, dataloader_ns, cpu_exec_ns,
    other_ns, total_ns (= end - start = the sum of the categories).
    """
    bounds = step_boundaries(trace)
    starts, ends = bounds["start_ns"].to_numpy(), bounds["end_ns"].to_numpy()
    slots = iv.merge(starts, ends)
    out = bounds.copy()
    for role, intervals in _role_intervals(trace.events).items():
        claimed = iv.intersect(slots, intervals)
        slots = iv.subtract(slots, claimed)
        out[f"{role}_ns"] = iv.overlap_with_windows(claimed, starts, ends)
    out["other_ns"] = iv.overlap_with_windows(slots, starts, ends)
    out["total_ns"] = ends - starts
    return out
