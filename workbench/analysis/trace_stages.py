"""The workbench's stage ranges in a trace: each stage's host cost and the GPU work it launched.

Stage ranges are host events ``workbench.naming.stage_from_range_name`` recognizes; work counts
for a range when its runtime call starts inside it on the same thread. Per stage: ``host_ns``
(summed ranges), ``gpu_ns`` (GPU time of the work launched inside), ``launch_*`` (kernel and graph
launch calls), ``transfer_*`` (copies launched inside), ``sync_*`` (:data:`SYNC_CALL_NAMES` calls).
Flags: ``launch_bound`` (>= :data:`LAUNCHES_PER_RANGE` launch calls per range and GPU work under
:data:`GPU_SHARE` of host time: the GPU waits while the host dispatches), ``transfer_bound``
(copies >= :data:`TRANSFER_SHARE` of its GPU time), ``sync_heavy`` (sync calls >=
:data:`SYNC_SHARE` of host time). :func:`launch_verdict` turns them into one sentence."""

from __future__ import annotations

import numpy as np

from ..naming import stage_from_range_name
from ..trace import HOST_KINDS, KIND_KERNEL, KIND_MEMCPY, KINDS, Trace, derived
from ..trace import intervals as iv
from ..trace.columns import factorize_objects, pd, text_frame
from ..trace.numbers import NA_INT
from .launches import (
    GRAPH_LAUNCH_NAMES,
    LAUNCH_NAMES,
    call_table,
    cold_table,
    launch_join,
    launch_pair_summary,
    pair_table,
    steady,
    steady_gpu_dur_ns,
)
from .steps import count_and_sum_in, step_table
from .transfers import SYNC_CALL_NAMES

LAUNCHES_PER_RANGE = 10
GPU_SHARE = 0.5
TRANSFER_SHARE = 0.3
SYNC_SHARE = 0.2
SHORT_SHARE = 0.5  # launch-bound needs at least this share of short kernels among the launches
_SUMS = (
    "host_ns gpu_ns kernel_count launch_count launch_ns transfer_count transfer_bytes transfer_ns "
    "sync_count sync_ns"
).split()


@derived
def range_table(trace: Trace) -> dict[str, np.ndarray]:
    """One row per stage range by start, as numpy columns: stage, ts_ns, dur_ns, pid, tid,
    tid_code, and the per-range sums of :data:`_SUMS` but ``host_ns``."""
    host = trace.rows_of(HOST_KINDS)
    rows = np.flatnonzero(host.name.matches(lambda n: stage_from_range_name(n) is not None))
    rows = rows[np.argsort(host.ts_ns[rows], kind="stable")]
    out = {
        "stage": np.array(
            [stage_from_range_name(n) for n in host.name.take(rows).values()], dtype=object
        ),
        "ts_ns": host.ts_ns[rows],
        "dur_ns": host.dur_ns[rows],
        "pid": host.pid.take(rows).values(),
        "tid": host.tid.take(rows).values(),
        "tid_code": host.tid.codes[rows],
    }
    join = launch_join(trace)
    launched = join.launched()
    runtime = join.runtime
    work_kind = join.work.kind[launched]
    kernels = launched[work_kind == KINDS.index(KIND_KERNEL)]
    copies = launched[work_kind == KINDS.index(KIND_MEMCPY)]
    launches = np.flatnonzero(runtime.name.isin(LAUNCH_NAMES | GRAPH_LAUNCH_NAMES))
    syncs = np.flatnonzero(runtime.name.isin(SYNC_CALL_NAMES))

    def work(rows, values=None):
        return join.launch_tid[rows], join.launch_ts_ns[rows], values

    def calls(rows):
        return runtime.tid.codes[rows], runtime.ts_ns[rows], runtime.dur_ns[rows]

    measures = {
        "gpu_ns": work(launched, join.work.dur_ns[launched]),
        "kernel_count": work(kernels),
        "launch": calls(launches),
        "transfer": work(copies, join.work.dur_ns[copies]),
        "transfer_bytes": work(
            copies, np.where(join.work.bytes[copies] == NA_INT, 0, join.work.bytes[copies])
        ),
        "sync": calls(syncs),
    }
    for key, (tids, ts, values) in measures.items():
        count, total = _inside(out, tids, ts, values)
        if key in ("launch", "transfer", "sync"):
            out[f"{key}_count"], out[f"{key}_ns"] = count, total
        else:
            out[key] = count if values is None else total
    return out


def _inside(ranges: dict, tids: np.ndarray, ts: np.ndarray, values: np.ndarray | None):
    """Count and sum of ``values`` of the rows whose ``ts`` lies in each range, same thread."""
    count = np.zeros(ranges["ts_ns"].size, np.int64)
    total = np.zeros(ranges["ts_ns"].size, np.int64)
    for tid in np.unique(ranges["tid_code"]):
        mine, hit = ranges["tid_code"] == tid, tids == tid
        vals = np.zeros(hit.sum(), np.int64) if values is None else values[hit]
        starts = ranges["ts_ns"][mine]
        ends = starts + ranges["dur_ns"][mine]
        count[mine], total[mine] = count_and_sum_in(ts[hit], vals, starts, ends)
    return count, total


def trace_stage_summary(trace: Trace) -> pd.DataFrame:
    """Per stage of a *trace* (first appearance order), in ns: count, host_ns, host_mean_ns,
    :data:`_SUMS` and the three flags. (A *run*'s per-stage latency, in ms:
    :func:`workbench.stage_summary`.)"""
    return text_frame(stage_summary_table(trace), "stage")


@derived
def stage_summary_table(trace: Trace) -> dict[str, np.ndarray]:
    """:func:`trace_stage_summary` as numpy columns (stages in order of first appearance)."""
    ranges = range_table(trace)
    codes, stages = factorize_objects(list(ranges["stage"]))
    n = len(stages)
    out = {
        "stage": np.array(stages, dtype=object),
        "count": np.bincount(codes, minlength=n).astype(np.int64),
    }
    for key in _SUMS:
        values = ranges["dur_ns" if key == "host_ns" else key]
        total = np.zeros(n, np.int64)
        np.add.at(total, codes, values)
        out[key] = total
    out["host_mean_ns"] = out["host_ns"] / np.maximum(out["count"], 1) if n else np.empty(0, float)
    host = np.maximum(out["host_ns"], 1)
    out["launch_bound"] = (out["launch_count"] >= LAUNCHES_PER_RANGE * out["count"]) & (
        out["gpu_ns"] < GPU_SHARE * host
    )
    out["transfer_bound"] = (out["transfer_ns"] > 0) & (
        out["transfer_ns"] >= TRANSFER_SHARE * out["gpu_ns"]
    )
    out["sync_heavy"] = (out["sync_ns"] > 0) & (out["sync_ns"] >= SYNC_SHARE * host)
    return out


def launch_verdict(trace: Trace) -> tuple[bool, str]:
    """``(launch_bound, sentence)`` of a trace for the CLI, the JSON report and the figures: the
    bound stages (or the closest); without stage ranges, the rule per ``ProfilerStep`` of the steady
    state (:func:`steady_host_ns`) with at least half the launches short kernels (HTA's rule)."""
    stages = stage_summary_table(trace)
    if stages["stage"].size:
        host = np.maximum(stages["host_ns"], 1)
        launch, gpu = stages["launch_ns"] / host, stages["gpu_ns"] / host
        per = stages["launch_count"] / np.maximum(stages["count"], 1)
        bound = np.flatnonzero(stages["launch_bound"])
        detail = ", ".join(
            f"{stages['stage'][i]} ({per[i]:.0f} launches per call, GPU busy {100 * gpu[i]:.0f}% of "
            f"its host time; launch calls {100 * launch[i]:.0f}%)"
            for i in (bound if bound.size else [int(np.argmax(per))])
        )
        return bool(bound.size), f"{'Launch-bound' if bound.size else 'Not launch-bound'}: {detail}"
    host_ns = steady_host_ns(trace)
    calls = steady(call_table(trace), trace)
    launch_ns = int(calls["dur_ns"][~calls["graph"]].sum())
    gpu_ns = steady_gpu_dur_ns(trace)
    pairs = launch_pair_summary(steady(pair_table(trace), trace))
    short = pairs["short_kernels"] / pairs["count"] if pairs["count"] else 0.0
    per = calls["ts_ns"].size / max(step_table(trace)["ts_ns"].size, 1)
    bound = per >= LAUNCHES_PER_RANGE and gpu_ns < GPU_SHARE * host_ns and short >= SHORT_SHARE
    cold = cold_table(trace)["ts_ns"].size
    shorts = (
        f"{100 * short:.0f}% of {pairs['count']} launches short kernels"
        if pairs["count"]
        else "no launch joined to GPU work"
    )
    apart = f"; cold start set apart ({cold} call{'s' if cold > 1 else ''})" if cold else ""
    return bound, (
        f"{'Launch-bound' if bound else 'Not launch-bound'}: {per:.0f} launches per step, GPU busy "
        f"{100 * gpu_ns / host_ns:.0f}% of host time, launch calls {100 * launch_ns / host_ns:.0f}%, "
        f"{shorts}{apart}"
    )


def steady_host_ns(trace: Trace) -> int:
    """Host time of the steady state (summed steps, else the host span) less the union of the
    cold-start calls inside; at least 1 ns."""
    steps = step_table(trace)
    if steps["ts_ns"].size:
        starts = steps["ts_ns"]
        windows = iv.merge(starts, starts + steps["dur_ns"])
        summed = int(steps["dur_ns"].sum())
    else:
        host = trace.rows_of(HOST_KINDS)
        if not len(host):
            return 1
        start, end = int(host.ts_ns.min()), int((host.ts_ns + host.dur_ns).max())
        windows = iv.as_intervals([start], [end])
        summed = end - start
    cold = cold_table(trace)
    cold_calls = iv.merge(cold["ts_ns"], cold["ts_ns"] + cold["dur_ns"])
    return max(summed - iv.length(iv.intersect(windows, cold_calls)), 1)
