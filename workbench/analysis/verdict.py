"""One launch-bound verdict for a trace, shared by the CLI, the JSON report and the figures.

Rule (the stage rule of :mod:`workbench.analysis.trace_stages`): a stage is
launch-bound when it makes >= 10 launch calls per range and the GPU work they
make lasts < 50 % of its host time. With stage ranges the verdict names the
bound stages (or the stage closest to it); without them the rule is applied to
the whole trace's steady state, per ``ProfilerStep`` (host time: the summed
steps, else the host span), and one more condition ties it to the launch panel
drawn beside it: at least half of the launches are short kernels (GPU work
shorter than its launch call, HTA's rule), else the launch calls are not what
keeps the GPU waiting.

Steady state: cold-start calls (:func:`~workbench.analysis.launches.cold_start_calls`:
device, context and stream set-up, a kernel's slow first launch) are set apart;
their time leaves the host time, their launches and GPU work leave the counts.
On the AlexNet trace they were 40.3 s of a 43.4 s host span, and the verdict
read "Launch-bound ... GPU busy 0 %" beside a panel where 76 % of launches
were not short kernels.
"""
from __future__ import annotations

from ..trace import Trace
from ..trace import intervals as iv
from .launches import (cold_start_calls, launch_pair_summary, steady_gpu_work, steady_launch_calls,
                       steady_launch_pairs)
from .steps import profiler_steps
from .trace_stages import GPU_SHARE, LAUNCHES_PER_RANGE, trace_stage_summary

SHORT_SHARE = 0.5  # launch-bound needs at least this share of short kernels among the launches


def launch_verdict(trace: Trace) -> tuple[bool, str]:
    """``(launch_bound, sentence)``, using the trace analysis' rule (``trace_stages``):
    >= 10 launch calls per range (request) and GPU work < 50 % of host time.

    With stage ranges the verdict is the analysis' per-stage ``launch_bound``
    flag (the sentence names the bound stages, or the stage closest to it);
    without them the rule is applied to the whole trace's steady state (see the
    module docstring), which also needs >= 50 % short kernels.
    """
    stages = trace_stage_summary(trace)
    if not stages.empty:
        return _stage_verdict(stages)
    host_ns = steady_host_ns(trace)
    calls = steady_launch_calls(trace)
    launch_ns = int(calls.loc[~calls["graph"], "dur_ns"].sum())
    gpu_ns = int(steady_gpu_work(trace)["dur_ns"].sum())
    pairs = launch_pair_summary(steady_launch_pairs(trace))
    short = pairs["short_kernels"] / pairs["count"] if pairs["count"] else 0.0
    per = len(calls) / max(len(profiler_steps(trace)), 1)
    bound = per >= LAUNCHES_PER_RANGE and gpu_ns < GPU_SHARE * host_ns and short >= SHORT_SHARE
    cold = cold_start_calls(trace)
    shorts = (f"{100 * short:.0f}% of {pairs['count']} launches short kernels" if pairs["count"]
              else "no launch joined to GPU work")
    apart = f"; cold start set apart ({len(cold)} call{'s' if len(cold) > 1 else ''})" if len(cold) else ""
    return bound, (f"{'Launch-bound' if bound else 'Not launch-bound'}: {per:.0f} launches per step, GPU busy "
                   f"{100 * gpu_ns / host_ns:.0f}% of host time, launch calls {100 * launch_ns / host_ns:.0f}%, "
                   f"{shorts}{apart}")


def _stage_verdict(stages) -> tuple[bool, str]:
    host = stages["host_ns"].clip(lower=1)
    share = stages.assign(launch=stages["launch_ns"] / host, gpu=stages["gpu_ns"] / host,
                          per=stages["launch_count"] / stages["count"].clip(lower=1))
    bound = share[share["launch_bound"]]
    rows = bound if not bound.empty else share.nlargest(1, "per")
    detail = ", ".join(f"{r.stage} ({r.per:.0f} launches per call, GPU busy {100 * r.gpu:.0f}% of its host time; "
                       f"launch calls {100 * r.launch:.0f}%)" for r in rows.itertuples())
    return (True, f"Launch-bound: {detail}") if not bound.empty else (False, f"Not launch-bound: {detail}")


def steady_host_ns(trace: Trace) -> int:
    """Host time of the steady state: the summed ``ProfilerStep`` ranges (else the host span) less the
    time of cold-start calls inside them (their union: nested calls count once); at least 1 ns."""
    steps = profiler_steps(trace)
    if not steps.empty:
        starts = steps["ts_ns"].to_numpy()
        windows = iv.merge(starts, starts + steps["dur_ns"].to_numpy())
        summed = int(steps["dur_ns"].sum())
    else:
        host = trace.host
        if not len(host):
            return 1
        start, end = int(host["ts_ns"].min()), int((host["ts_ns"] + host["dur_ns"]).max())
        windows = iv.as_intervals([start], [end])
        summed = end - start
    cold = cold_start_calls(trace)
    cold_starts = cold["ts_ns"].to_numpy()
    cold_ns = iv.length(iv.intersect(windows, iv.merge(cold_starts, cold_starts + cold["dur_ns"].to_numpy())))
    return max(summed - cold_ns, 1)
