"""``analyze``: every trace analysis in one JSON-ready dict (what ``python -m workbench
analyze TRACE --json`` prints).

Times are microseconds as floats (``*_us``), counts ints. Every key is always
present: counts are 0 when there is nothing to count; figures that do not exist
for the trace (GPU span/busy/idle without GPU events, bytes when no copy carries
them) are None; lists are empty. ``memcpy.by_kind`` always lists HtoD, DtoH and
DtoD. See the analysis modules for the definitions.
"""
from __future__ import annotations

import math
import os

import pandas as pd

from ..trace import Trace, load_trace
from ..units import NS_PER_US
from . import gpu_kernels, gpu_timeline, launches, steps, trace_stages, transfers, verdict
from .operators import top_operators

_BREAKDOWN = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other", "total")


def us(ns) -> float | None:
    """Integer (or float) ns -> float us; None/NaN stay None."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)) or ns is pd.NA:
        return None
    return float(ns) / NS_PER_US


def _opt_int(value) -> int | None:
    return None if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else int(value)


def analyze(trace_or_path: Trace | str | os.PathLike, progress=None) -> dict:
    """Load (if given a path) and run every analysis; a dict of plain JSON types.

    One :class:`~workbench.trace.Trace` serves every section: the launch join and the
    other derived tables are computed once. ``progress(stage, done, total)``, if given,
    hears of the loading and of each section done (``"analyze"``)."""
    is_loaded = isinstance(trace_or_path, Trace)
    model = trace_or_path if is_loaded else load_trace(trace_or_path, progress=progress)
    report = {}
    for done, (key, section) in enumerate(SECTIONS.items(), start=1):
        report[key] = section(model)
        if progress is not None:
            progress("analyze", done, len(SECTIONS))
    return report


def _trace(model: Trace) -> dict:
    return {"path": str(model.path), "schema": model.meta.get("schema"), "platform": model.meta.get("platform"),
            "events": len(model.events),
            "devices": [d.get("name") for d in model.device_properties if isinstance(d, dict)]}


def _verdict(model: Trace) -> dict:
    return dict(zip(("launch_bound", "sentence"), verdict.launch_verdict(model)))


def _sync_calls(model: Trace) -> list[dict]:
    return [{"name": r.name, "count": int(r.count), "total_us": us(r.total_ns)}
            for r in transfers.sync_calls(model).itertuples()]


def _top_ops(model: Trace, n: int = 15) -> list[dict]:
    """The operators with the most self time (any trace, CPU-only included); shapes when recorded."""
    return [{"name": r.name, "input_shapes": r.input_shapes or None, "calls": int(r.calls),
             "total_us": us(r.total_ns), "self_us": us(r.self_ns), "self_share": float(r.self_share)}
            for r in top_operators(model, n).itertuples()]


def _kernels(model: Trace) -> dict:
    s = gpu_kernels.kernel_summary(model)
    top = gpu_kernels.top_kernels(model, 10)
    return {"count": s["count"], "total_us": us(s["total_ns"]), "under_10us": s["under_10us"],
            "busy_us": us(s["busy_ns"]),
            "top": [{"name": r.name, "count": int(r.count), "total_us": us(r.total_ns), "share": float(r.share)}
                    for r in top.itertuples()]}


def _copy_rows(frame: pd.DataFrame, key: str) -> dict:
    return {getattr(r, key): {"count": int(r.count), "total_us": us(r.total_ns), "bytes": _opt_int(r.bytes),
                              "gb_per_s": None if pd.isna(r.gb_per_s) else float(r.gb_per_s)}
            for r in frame.itertuples()}


def _memcpy(model: Trace) -> dict:
    s = transfers.memcpy_summary(model)
    return {"count": s["count"], "total_us": us(s["total_ns"]), "bytes": s["bytes"],
            "by_kind": _copy_rows(transfers.memcpy_by_direction(model), "direction"),
            "by_kind_and_host_memory": _copy_rows(transfers.memcpy_by_host_memory(model), "key")}


def _memset(model: Trace) -> dict:
    s = transfers.memset_summary(model)
    return {"count": s["count"], "total_us": us(s["total_ns"]), "bytes": s["bytes"]}


def _launches(model: Trace) -> dict:
    s = launches.launch_summary(launches.launch_calls(model))
    cold = launches.cold_start_summary(model)
    return {"count": s["count"], "total_us": us(s["total_ns"]), "graph_count": s["graph_count"],
            "graph_total_us": us(s["graph_total_ns"]), "graph_gpu_count": s["graph_gpu_count"],
            "cold_start": {"calls": cold["calls"], "dur_us": us(cold["dur_ns"])}}


def _pairs(pairs: pd.DataFrame) -> dict:
    s = launches.launch_pair_summary(pairs)
    dist = launches.launch_distribution(pairs)
    return {"count": s["count"], "cpu_over_50us": s["cpu_over_50us"], "delay_over_100us": s["delay_over_100us"],
            "gpu_shorter_than_cpu": s["gpu_shorter_than_cpu"], "short_kernels": s["short_kernels"],
            "cpu_us": us(s["cpu_dur_ns"]), "gpu_us": us(s["gpu_dur_ns"]), "launch_delay_us": us(s["launch_delay_ns"]),
            "distribution": {r.metric: {k: us(getattr(r, f"{k}_ns")) for k in ("mean", "p50", "p90", "p95", "p99", "max")}
                             for r in dist.itertuples()}}


def _gpu(model: Trace) -> dict:
    s = gpu_timeline.gpu_time_summary(model)
    idle = gpu_timeline.stream_idle(model)
    return {"span_us": us(s["span_ns"]), "busy_us": us(s["busy_ns"]), "idle_us": us(s["idle_ns"]),
            "idle_fraction": s["idle_fraction"],
            "streams": [{"device": _opt_int(r.device), "stream": _opt_int(r.stream), "count": int(r.count),
                         "idle_us": us(r.idle_ns), "host_wait_us": us(r.host_wait_ns),
                         "kernel_wait_us": us(r.kernel_wait_ns), "other_us": us(r.other_ns)}
                        for r in idle.itertuples()]}


def _steps(model: Trace) -> list[dict]:
    return [{"name": r.name, "dur_us": us(r.dur_ns), "kernel_count": int(r.kernel_count),
             "kernel_us": us(r.kernel_ns), "memcpy_us": us(r.memcpy_ns), "memset_us": us(r.memset_ns)}
            for r in steps.profiler_steps(model).itertuples()]


def _breakdown(model: Trace) -> list[dict]:
    rows = []
    for r in steps.step_breakdown(model).to_dict("records"):
        label = r["step"]
        entry = {"step": int(label) if label.isdigit() else label}
        rows.append(entry | {f"{c}_us": us(r[f"{c}_ns"]) for c in _BREAKDOWN})
    return rows


def _stages(model: Trace) -> list[dict]:
    out = []
    for r in trace_stages.trace_stage_summary(model).to_dict("records"):
        out.append({"stage": r["stage"], "count": int(r["count"]), "host_us": us(r["host_ns"]),
                    "gpu_us": us(r["gpu_ns"]), "kernel_count": int(r["kernel_count"]),
                    "launch_count": int(r["launch_count"]), "launch_us": us(r["launch_ns"]),
                    "transfer_bytes": int(r["transfer_bytes"]), "transfer_us": us(r["transfer_ns"]),
                    "sync_us": us(r["sync_ns"]), "launch_bound": bool(r["launch_bound"]),
                    "transfer_bound": bool(r["transfer_bound"]), "sync_heavy": bool(r["sync_heavy"])})
    return out


# Report sections in output order: key -> function of the model (a dict of plain JSON types).
SECTIONS = {
    "trace": _trace, "kernels": _kernels, "memcpy": _memcpy, "memset": _memset, "launches": _launches,
    "launch_pairs": lambda model: _pairs(launches.launch_pairs(model)), "launch_verdict": _verdict, "gpu": _gpu,
    "sync_calls": _sync_calls, "steps": _steps, "step_breakdown": _breakdown, "stages": _stages,
    "top_ops": _top_ops,
}
