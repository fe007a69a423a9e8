"""``analyze``: every trace analysis in one JSON-ready dict (what ``python -m workbench
analyze TRACE --json`` prints).

Times are microseconds as floats (``*_us``), counts ints. Every key is always
present: counts are 0 when there is nothing to count; figures that do not exist
for the trace (GPU span/busy/idle without GPU events, bytes when no copy carries
them) are None; lists are empty. ``memcpy.by_kind`` always lists HtoD, DtoH and
DtoD. See the analysis modules for the definitions.

Every section reads the trace's numpy columns (:mod:`workbench.trace.columns`): running
``analyze`` imports neither pandas nor pyarrow.
"""

from __future__ import annotations

import math
import os

from ..trace import Trace, load_trace
from ..units import NS_PER_US
from . import gpu_kernels, gpu_timeline, launches, steps, trace_stages, transfers, verdict
from .operators import operator_rows

_BREAKDOWN = (
    "kernel",
    "memcpy",
    "memset",
    "communication",
    "runtime",
    "dataloader",
    "cpu_exec",
    "other",
    "total",
)


def us(ns) -> float | None:
    """Integer (or float) ns -> float us; None/NaN stay None."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)) or _is_na(ns):
        return None
    return float(ns) / NS_PER_US


def _is_na(value) -> bool:
    return type(value).__name__ == "NAType"  # pandas.NA, without importing pandas


def _opt_int(value) -> int | None:
    return (
        None
        if value is None or _is_na(value) or (isinstance(value, float) and math.isnan(value))
        else int(value)
    )


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
    return {
        "path": str(model.path),
        "schema": model.meta.get("schema"),
        "platform": model.meta.get("platform"),
        "events": len(model),
        "devices": [d.get("name") for d in model.device_properties if isinstance(d, dict)],
    }


def _verdict(model: Trace) -> dict:
    return dict(zip(("launch_bound", "sentence"), verdict.launch_verdict(model)))


def _sync_calls(model: Trace) -> list[dict]:
    return [
        {"name": r["name"], "count": r["count"], "total_us": us(r["total_ns"])}
        for r in transfers.sync_rows(model)
    ]


def _top_ops(model: Trace, n: int = 15) -> list[dict]:
    """The operators with the most self time (any trace, CPU-only included); shapes when recorded."""
    return [
        {
            "name": r["name"],
            "input_shapes": r["input_shapes"] or None,
            "calls": r["calls"],
            "total_us": us(r["total_ns"]),
            "self_us": us(r["self_ns"]),
            "self_share": float(r["self_share"]),
        }
        for r in operator_rows(model, n)
    ]


def _kernels(model: Trace) -> dict:
    s = gpu_kernels.kernel_summary(model)
    return {
        "count": s["count"],
        "total_us": us(s["total_ns"]),
        "under_10us": s["under_10us"],
        "busy_us": us(s["busy_ns"]),
        "top": [
            {
                "name": r["name"],
                "count": r["count"],
                "total_us": us(r["total_ns"]),
                "share": float(r["share"]),
            }
            for r in gpu_kernels.kernel_rows(model, 10)
        ],
    }


def _copy_rows(rows: list[dict], key: str) -> dict:
    return {
        r[key]: {
            "count": r["count"],
            "total_us": us(r["total_ns"]),
            "bytes": _opt_int(r["bytes"]),
            "gb_per_s": None if math.isnan(r["gb_per_s"]) else float(r["gb_per_s"]),
        }
        for r in rows
    }


def _memcpy(model: Trace) -> dict:
    s = transfers.memcpy_summary(model)
    return {
        "count": s["count"],
        "total_us": us(s["total_ns"]),
        "bytes": s["bytes"],
        "by_kind": _copy_rows(transfers.direction_rows(model), "direction"),
        "by_kind_and_host_memory": _copy_rows(transfers.host_memory_rows(model), "key"),
    }


def _memset(model: Trace) -> dict:
    s = transfers.memset_summary(model)
    return {"count": s["count"], "total_us": us(s["total_ns"]), "bytes": s["bytes"]}


def _launches(model: Trace) -> dict:
    s = launches.launch_summary(launches.call_table(model))
    cold = launches.cold_start_summary(model)
    return {
        "count": s["count"],
        "total_us": us(s["total_ns"]),
        "graph_count": s["graph_count"],
        "graph_total_us": us(s["graph_total_ns"]),
        "graph_gpu_count": s["graph_gpu_count"],
        "cold_start": {"calls": cold["calls"], "dur_us": us(cold["dur_ns"])},
    }


def _pairs(model: Trace) -> dict:
    pairs = launches.pair_table(model)
    s = launches.launch_pair_summary(pairs)
    return {
        "count": s["count"],
        "cpu_over_50us": s["cpu_over_50us"],
        "delay_over_100us": s["delay_over_100us"],
        "gpu_shorter_than_cpu": s["gpu_shorter_than_cpu"],
        "short_kernels": s["short_kernels"],
        "cpu_us": us(s["cpu_dur_ns"]),
        "gpu_us": us(s["gpu_dur_ns"]),
        "launch_delay_us": us(s["launch_delay_ns"]),
        "distribution": {
            r["metric"]: {k: us(r[f"{k}_ns"]) for k in ("mean", "p50", "p90", "p95", "p99", "max")}
            for r in launches.distribution_rows(pairs)
        },
    }


def _gpu(model: Trace) -> dict:
    s = gpu_timeline.gpu_time_summary(model)
    return {
        "span_us": us(s["span_ns"]),
        "busy_us": us(s["busy_ns"]),
        "idle_us": us(s["idle_ns"]),
        "idle_fraction": s["idle_fraction"],
        "streams": [
            {
                "device": r["device"],
                "stream": r["stream"],
                "count": r["count"],
                "idle_us": us(r["idle_ns"]),
                "host_wait_us": us(r["host_wait_ns"]),
                "kernel_wait_us": us(r["kernel_wait_ns"]),
                "other_us": us(r["other_ns"]),
            }
            for r in gpu_timeline.stream_idle_rows(model)
        ],
    }


def _steps(model: Trace) -> list[dict]:
    t = steps.step_table(model)
    return [
        {
            "name": str(t["name"][i]),
            "dur_us": us(t["dur_ns"][i]),
            "kernel_count": int(t["kernel_count"][i]),
            "kernel_us": us(t["kernel_ns"][i]),
            "memcpy_us": us(t["memcpy_ns"][i]),
            "memset_us": us(t["memset_ns"][i]),
        }
        for i in range(t["ts_ns"].size)
    ]


def _breakdown(model: Trace) -> list[dict]:
    t = steps.breakdown_table(model)
    rows = []
    for i, label in enumerate(t["step"]):
        entry = {"step": int(label) if label.isdigit() else label}
        rows.append(entry | {f"{c}_us": us(t[f"{c}_ns"][i]) for c in _BREAKDOWN})
    return rows


def _stages(model: Trace) -> list[dict]:
    s = trace_stages.stage_summary_table(model)
    return [
        {
            "stage": str(s["stage"][i]),
            "count": int(s["count"][i]),
            "host_us": us(s["host_ns"][i]),
            "gpu_us": us(s["gpu_ns"][i]),
            "kernel_count": int(s["kernel_count"][i]),
            "launch_count": int(s["launch_count"][i]),
            "launch_us": us(s["launch_ns"][i]),
            "transfer_bytes": int(s["transfer_bytes"][i]),
            "transfer_us": us(s["transfer_ns"][i]),
            "sync_us": us(s["sync_ns"][i]),
            "launch_bound": bool(s["launch_bound"][i]),
            "transfer_bound": bool(s["transfer_bound"][i]),
            "sync_heavy": bool(s["sync_heavy"][i]),
        }
        for i in range(s["stage"].size)
    ]


# Report sections in output order: key -> function of the trace (a dict of plain JSON types).
SECTIONS = {
    "trace": _trace,
    "kernels": _kernels,
    "memcpy": _memcpy,
    "memset": _memset,
    "launches": _launches,
    "launch_pairs": _pairs,
    "launch_verdict": _verdict,
    "gpu": _gpu,
    "sync_calls": _sync_calls,
    "steps": _steps,
    "step_breakdown": _breakdown,
    "stages": _stages,
    "top_ops": _top_ops,
}
