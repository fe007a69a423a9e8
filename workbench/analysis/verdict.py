"""One launch-bound verdict for a trace, shared by the CLI, the JSON report and the figures.

With stage ranges, :mod:`workbench.analysis.trace_stages`' rule names the bound stages (or the
closest). Without, the rule applies to the steady state per ``ProfilerStep`` (host time: the summed
steps, else the host span), and at least half of the launches must be short kernels (HTA's rule),
else the launch calls are not what keeps the GPU waiting. Cold-start calls
(:func:`~workbench.analysis.launches.cold_table`) leave the host time and the counts."""

from __future__ import annotations

import numpy as np

from ..trace import HOST_KINDS, Trace
from ..trace import intervals as iv
from .launches import (
    call_table,
    cold_table,
    launch_pair_summary,
    pair_table,
    steady,
    steady_gpu_dur_ns,
)
from .steps import step_table
from .trace_stages import GPU_SHARE, LAUNCHES_PER_RANGE, stage_summary_table

SHORT_SHARE = 0.5  # launch-bound needs at least this share of short kernels among the launches


def launch_verdict(trace: Trace) -> tuple[bool, str]:
    """``(launch_bound, sentence)`` of a trace."""
    stages = stage_summary_table(trace)
    if stages["stage"].size:
        return _stage_verdict(stages)
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


def _stage_verdict(stages: dict) -> tuple[bool, str]:
    host = np.maximum(stages["host_ns"], 1)
    launch, gpu = stages["launch_ns"] / host, stages["gpu_ns"] / host
    per = stages["launch_count"] / np.maximum(stages["count"], 1)
    bound = np.flatnonzero(stages["launch_bound"])
    rows = bound if bound.size else [int(np.argmax(per))]
    detail = ", ".join(
        f"{stages['stage'][i]} ({per[i]:.0f} launches per call, GPU busy {100 * gpu[i]:.0f}% of its "
        f"host time; launch calls {100 * launch[i]:.0f}%)"
        for i in rows
    )
    return bool(bound.size), f"{'Launch-bound' if bound.size else 'Not launch-bound'}: {detail}"


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
