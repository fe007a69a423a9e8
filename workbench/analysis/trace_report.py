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
from . import gpu_timeline, kernels, launches, steps, trace_stages, transfers, verdict

_BREAKDOWN = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other", "total")


def us(ns) -> float | None:
    """Integer (or float) ns -> float us; None/NaN stay None."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)) or ns is pd.NA:
        return None
    return float(ns) / 1000.0


def _opt_int(value) -> int | None:
    return None if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else int(value)


def analyze(trace_or_path: Trace | str | os.PathLike) -> dict:
    """Load (if given a path) and run every analysis; a dict of plain JSON types."""
    trace = trace_or_path if isinstance(trace_or_path, Trace) else load_trace(trace_or_path)
    events = trace.events
    pairs = launches.launch_pairs(events)
    return {
        "trace": {"path": str(trace.path), "schema": trace.meta.get("schema"),
                  "platform": trace.meta.get("platform"), "events": len(events),
                  "devices": [d.get("name") for d in trace.device_properties if isinstance(d, dict)]},
        "kernels": _kernels(events),
        "memcpy": _memcpy(events),
        "memset": _memset(events),
        "launches": _launches(events),
        "launch_pairs": _pairs(pairs),
        "launch_verdict": dict(zip(("launch_bound", "sentence"), verdict.launch_verdict(events))),
        "gpu": _gpu(events),
        "sync_calls": [{"name": r.name, "count": int(r.count), "total_us": us(r.total_ns)}
                       for r in transfers.sync_calls(events).itertuples()],
        "steps": _steps(events),
        "step_breakdown": _breakdown(events),
        "stages": _stages(events),
    }


def _kernels(events: pd.DataFrame) -> dict:
    s = kernels.kernel_summary(events)
    top = kernels.top_kernels(events, 10)
    return {"count": s["count"], "total_us": us(s["total_ns"]), "under_10us": s["under_10us"],
            "busy_us": us(s["busy_ns"]),
            "top": [{"name": r.name, "count": int(r.count), "total_us": us(r.total_ns), "share": float(r.share)}
                    for r in top.itertuples()]}


def _copy_rows(frame: pd.DataFrame, key: str) -> dict:
    return {getattr(r, key): {"count": int(r.count), "total_us": us(r.total_ns), "bytes": _opt_int(r.bytes),
                              "gb_per_s": None if pd.isna(r.gb_per_s) else float(r.gb_per_s)}
            for r in frame.itertuples()}


def _memcpy(events: pd.DataFrame) -> dict:
    s = transfers.memcpy_summary(events)
    return {"count": s["count"], "total_us": us(s["total_ns"]), "bytes": s["bytes"],
            "by_kind": _copy_rows(transfers.memcpy_by_direction(events), "direction"),
            "by_kind_and_host_memory": _copy_rows(transfers.memcpy_by_host_memory(events), "key")}


def _memset(events: pd.DataFrame) -> dict:
    s = transfers.memset_summary(events)
    return {"count": s["count"], "total_us": us(s["total_ns"]), "bytes": s["bytes"]}


def _launches(events: pd.DataFrame) -> dict:
    s = launches.launch_summary(launches.launch_calls(events))
    return {"count": s["count"], "total_us": us(s["total_ns"]), "graph_count": s["graph_count"],
            "graph_total_us": us(s["graph_total_ns"]), "graph_gpu_count": s["graph_gpu_count"]}


def _pairs(pairs: pd.DataFrame) -> dict:
    s = launches.launch_pair_summary(pairs)
    dist = launches.launch_distribution(pairs)
    return {"count": s["count"], "cpu_over_50us": s["cpu_over_50us"], "delay_over_100us": s["delay_over_100us"],
            "gpu_shorter_than_cpu": s["gpu_shorter_than_cpu"], "short_kernels": s["short_kernels"],
            "cpu_us": us(s["cpu_dur_ns"]), "gpu_us": us(s["gpu_dur_ns"]), "launch_delay_us": us(s["launch_delay_ns"]),
            "distribution": {r.metric: {k: us(getattr(r, f"{k}_ns")) for k in ("mean", "p50", "p90", "p95", "p99", "max")}
                             for r in dist.itertuples()}}


def _gpu(events: pd.DataFrame) -> dict:
    s = gpu_timeline.gpu_time_summary(events)
    idle = gpu_timeline.stream_idle(events)
    return {"span_us": us(s["span_ns"]), "busy_us": us(s["busy_ns"]), "idle_us": us(s["idle_ns"]),
            "idle_fraction": s["idle_fraction"],
            "streams": [{"device": _opt_int(r.device), "stream": _opt_int(r.stream), "count": int(r.count),
                         "idle_us": us(r.idle_ns), "host_wait_us": us(r.host_wait_ns),
                         "kernel_wait_us": us(r.kernel_wait_ns), "other_us": us(r.other_ns)}
                        for r in idle.itertuples()]}


def _steps(events: pd.DataFrame) -> list[dict]:
    return [{"name": r.name, "dur_us": us(r.dur_ns), "kernel_count": int(r.kernel_count),
             "kernel_us": us(r.kernel_ns), "memcpy_us": us(r.memcpy_ns), "memset_us": us(r.memset_ns)}
            for r in steps.profiler_steps(events).itertuples()]


def _breakdown(events: pd.DataFrame) -> list[dict]:
    rows = []
    for r in steps.step_breakdown(events).to_dict("records"):
        label = r["step"]
        entry = {"step": int(label) if label.isdigit() else label}
        rows.append(entry | {f"{c}_us": us(r[f"{c}_ns"]) for c in _BREAKDOWN})
    return rows


def _stages(events: pd.DataFrame) -> list[dict]:
    out = []
    for r in trace_stages.stage_summary(events).to_dict("records"):
        out.append({"stage": r["stage"], "count": int(r["count"]), "host_us": us(r["host_ns"]),
                    "gpu_us": us(r["gpu_ns"]), "kernel_count": int(r["kernel_count"]),
                    "launch_count": int(r["launch_count"]), "launch_us": us(r["launch_ns"]),
                    "transfer_bytes": int(r["transfer_bytes"]), "transfer_us": us(r["transfer_ns"]),
                    "sync_us": us(r["sync_ns"]), "launch_bound": bool(r["launch_bound"]),
                    "transfer_bound": bool(r["transfer_bound"]), "sync_heavy": bool(r["sync_heavy"])})
    return out
