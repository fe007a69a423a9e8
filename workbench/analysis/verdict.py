"""One launch-bound verdict for a trace, shared by the CLI, the JSON report and the figures.

Rule (the stage rule of :mod:`workbench.analysis.trace_stages`): a stage is
launch-bound when it makes >= 10 launch calls per range and the GPU work they
make lasts < 50 % of its host time. With stage ranges the verdict names the
bound stages (or the stage closest to it); without them the same rule is
applied to the whole trace, per ``ProfilerStep`` (host time: the summed steps,
else the host span).
"""
from __future__ import annotations

from ..trace import Trace
from .launches import launch_calls
from .steps import profiler_steps
from .trace_stages import GPU_SHARE, LAUNCHES_PER_RANGE, trace_stage_summary


def launch_verdict(trace: Trace) -> tuple[bool, str]:
    """``(launch_bound, sentence)``, using the trace analysis' rule (``trace_stages``):
    >= 10 launch calls per range (request) and GPU work < 50 % of host time.

    With stage ranges the verdict is the analysis' per-stage ``launch_bound``
    flag (the sentence names the bound stages, or the stage closest to it);
    without them the same rule is applied to the whole trace's host time
    (summed ``ProfilerStep`` ranges, else the host span).
    """
    stages = trace_stage_summary(trace)
    if not stages.empty:
        host = stages["host_ns"].clip(lower=1)
        share = stages.assign(launch=stages["launch_ns"] / host, gpu=stages["gpu_ns"] / host,
                              per=stages["launch_count"] / stages["count"].clip(lower=1))
        bound = share[share["launch_bound"]]
        rows = bound if not bound.empty else share.nlargest(1, "per")
        detail = ", ".join(f"{r.stage} ({r.per:.0f} launches per call, GPU busy {100 * r.gpu:.0f}% of its host time; "
                           f"launch calls {100 * r.launch:.0f}%)" for r in rows.itertuples())
        return (True, f"Launch-bound: {detail}") if not bound.empty else (False, f"Not launch-bound: {detail}")
    host_ns = _host_ns(trace)
    calls = launch_calls(trace)
    launch_ns = int(calls.loc[~calls["graph"], "dur_ns"].sum())
    gpu_ns = int(trace.gpu_work["dur_ns"].sum())
    per = len(calls) / max(len(profiler_steps(trace)), 1)
    bound = per >= LAUNCHES_PER_RANGE and gpu_ns < GPU_SHARE * host_ns
    return bound, (f"{'Launch-bound' if bound else 'Not launch-bound'}: {per:.0f} launches per step, GPU busy "
                   f"{100 * gpu_ns / host_ns:.0f}% of host time, launch calls {100 * launch_ns / host_ns:.0f}%")


def _host_ns(trace: Trace) -> int:
    steps = profiler_steps(trace)
    if not steps.empty:
        return max(int(steps["dur_ns"].sum()), 1)
    host = trace.host
    return max(int((host["ts_ns"] + host["dur_ns"]).max() - host["ts_ns"].min()), 1) if len(host) else 1
