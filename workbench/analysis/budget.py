"""The latency budget: where each request's time goes, stage by stage.

Input is a run (``workbench.record.Run``): its ``requests`` and ``stages`` tables.
Only measured (non-warm-up), successful requests enter the percentiles; warm-up
is summarized apart and failures are counted per stage. ``unattributed`` is
end to end minus the sum of the stages, per request: host time between stages
(the runner's own bookkeeping, Python glue). It is shown, never hidden.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from ..record.meta import ProfileMeta, RunMeta
from .explain import explain_keys
from .failures import failure_summary, noise_summary, records_summary, throughput_items_per_s
from .matrix import END_TO_END, UNATTRIBUTED, measured_ok, stage_matrix  # noqa: F401 (the budget's public names)
from .tokens import token_summary
from .stats import NS_PER_MS, TAIL_KEYS, percentile_ci_ns, summarize_ns, tail_summary_ns

SUMMARY_COLUMNS = ["count", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"]
EXTRA_TAIL = [k for k in TAIL_KEYS if k not in SUMMARY_COLUMNS]  # p99.9 and what the max bounds
DEVICE_COLUMNS = ("mean_ms", "p50_ms", "p95_ms", "p99_ms")  # of CUDA-event time, as device_<column>


def stage_summary(
    run, stages: pd.DataFrame | None = None, stage_order: list[str] | None = None
) -> pd.DataFrame:
    """Per-stage statistics of host wall time, with end to end and unattributed.

    In: a run (``workbench.record.Run``: its ``requests``, ``stages`` and stage
    order). The piecewise form ``stage_summary(requests, stages, stage_order)``
    still works for this release, with a DeprecationWarning.

    Out: one row per stage (pipeline order), then ``end_to_end``, then
    ``unattributed``; columns ``name``, ``kind`` (stage/end_to_end/unattributed),
    ``count``, ``mean_ms``, ``p50_ms``, ``p95_ms``, ``p99_ms``, ``max_ms``,
    ``share`` (mean over the end-to-end mean), ``p99_ci_low_ms``,
    ``p99_ci_high_ms`` (None where the sample does not bound it), ``p999_ms``,
    ``p999_ci_low_ms``, ``p999_ci_high_ms`` (None below ``p999_needs_count``
    requests), ``p999_needs_count``, ``max_above_percentile`` (the percentile the
    max is at or above with 95 % confidence: ``stats.tail_summary_ns``), and
    ``device_mean_ms``, ``device_p50_ms``, ``device_p95_ms``, ``device_p99_ms``
    (CUDA-event time; None on CPU).
    """
    requests, stages, stage_order = _pieces(run, stages, stage_order, "stage_summary")
    return _stage_summary(requests, stages, stage_order)


def _pieces(run, stages, stage_order, name: str) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(requests, stages, stage order) of a run, or of the deprecated piecewise arguments."""
    if stages is None and hasattr(run, "requests"):
        return run.requests, run.stages, list(run.stage_names)
    warnings.warn(
        f"{name}(requests, stages, stage_order) is deprecated; pass the run: {name}(run)",
        DeprecationWarning,
        stacklevel=3,
    )
    return run, stages, list(stage_order or [])


def _stage_summary(
    requests: pd.DataFrame, stages: pd.DataFrame, stage_order: list[str]
) -> pd.DataFrame:
    host = stage_matrix(requests, stages, stage_order)
    has_device = stages["device_dur_ns"].notna().any()
    device = stage_matrix(requests, stages, stage_order, "device_dur_ns") if has_device else None
    e2e_mean = host[END_TO_END].mean() if len(host) else np.nan
    names = [*stage_order, END_TO_END, UNATTRIBUTED]
    return pd.DataFrame([_summary_row(n, host[n], device, e2e_mean) for n in names])


def _summary_row(
    name: str, host: pd.Series, device: pd.DataFrame | None, e2e_mean: float
) -> dict[str, Any]:
    """A stage summary row: ``host`` is the stage's column, ``device`` the device matrix."""
    values = host.dropna().astype("int64").to_numpy()
    row = {
        "name": name,
        "kind": name if name in (END_TO_END, UNATTRIBUTED) else "stage",
        **summarize_ns(values),
    }
    row["share"] = float(values.mean() / e2e_mean) if values.size and e2e_mean else None
    for end, ns in zip(("low", "high"), percentile_ci_ns(values, 99)):
        row[f"p99_ci_{end}_ms"] = None if ns is None else ns / NS_PER_MS
    row |= tail_summary_ns(values)
    dev = {} if device is None else summarize_ns(device[name].dropna().astype("int64").to_numpy())
    return row | {f"device_{k}": dev.get(k) for k in DEVICE_COLUMNS}


def error_counts(requests: pd.DataFrame, stage_order: list[str]) -> dict[str, int]:
    """Stage name -> number of measured requests that failed in it (0 when none)."""
    failed = requests[~requests["warmup"].astype(bool) & ~requests["ok"].astype(bool)]
    counts = failed["error_stage"].value_counts()
    return {name: int(counts.get(name, 0)) for name in stage_order}


def warmup_summary(requests: pd.DataFrame) -> dict[str, Any]:
    """End-to-end figures of the warm-up requests, kept apart from the percentiles.

    ``count`` is every warm-up request, ``failed`` those that raised: a failed
    request is a failure, never a latency, so ``first_ms`` (None when the first
    failed), ``mean_ms`` and ``max_ms`` are of the successful ones.
    """
    warm = requests[requests["warmup"].astype(bool)]
    ok = warm["ok"].astype(bool).to_numpy()
    durs = warm["dur_ns"].astype("int64").to_numpy()
    first = float(durs[0]) / NS_PER_MS if durs.size and ok[0] else None
    out = {"count": int(durs.size), "failed": int((~ok).sum()), "first_ms": first}
    stats = summarize_ns(durs[ok])
    return out | {"mean_ms": stats["mean_ms"], "max_ms": stats["max_ms"]}


def budget(
    run, requests: pd.DataFrame | None = None, stages: pd.DataFrame | None = None
) -> dict[str, Any]:
    """The JSON object of ``workbench show --json``: stages, end_to_end, unattributed, errors, config (ms).

    A run with a streaming stage adds ``tokens`` (:func:`workbench.analysis.tokens.token_summary`).
    In: a run (``workbench.record.Run``). The piecewise form
    ``budget(meta, requests, stages)`` still works for this release, with a DeprecationWarning.
    """
    units = getattr(run, "units", None)
    if requests is None and hasattr(run, "requests"):
        meta, requests, stages = run.meta, run.requests, run.stages
    else:
        warnings.warn(
            "budget(meta, requests, stages) is deprecated; pass the run: budget(run)",
            DeprecationWarning,
            stacklevel=2,
        )
        meta = RunMeta.from_dict(run)
    order = list(meta.stages)
    table = _stage_summary(requests, stages, order)
    by_name = {row["name"]: row for row in table.to_dict("records")}
    has_device = stages["device_dur_ns"].notna().any()

    def entry(name: str, stage: bool) -> dict[str, Any]:
        row = by_name[name]
        keys = SUMMARY_COLUMNS + (["share"] if stage else []) + ["p99_ci_low_ms", "p99_ci_high_ms"]
        keys += EXTRA_TAIL
        out = {k: row[k] for k in keys}
        if has_device:
            out["device"] = {k: row[f"device_{k}"] for k in DEVICE_COLUMNS}
        return ({"name": name} | out) if stage else out

    return {
        "pipeline": meta.pipeline,
        "kind": meta.kind,
        "stages": [entry(name, True) for name in order],
        "end_to_end": entry(END_TO_END, False),
        "unattributed": entry(UNATTRIBUTED, False),
        "errors": error_counts(requests, order),
        "warmup": warmup_summary(requests),
        "config": meta.config.to_dict(),
        "timing": meta.timing.to_dict(),
        "status": meta.status,
        **trust_keys(meta, requests, order),
        **explain_keys(meta, requests, stages, order),
        **({} if units is None else {"tokens": token_summary(requests, stages, units)}),
    }


def trust_keys(meta, requests: pd.DataFrame, order: list[str]) -> dict[str, Any]:
    """``failures``, ``throughput_items_per_s``, ``noise``, ``quantization``, ``fingerprint`` of a run."""
    load = getattr(meta, "load", None)  # load and served runs
    executors = load.warmup_failures if load else []  # a load run's untimed warm-up calls
    profiled = meta if isinstance(meta, ProfileMeta) else ProfileMeta()
    fingerprint = getattr(meta, "fingerprint", None)  # profile and load runs
    return {
        "failures": failure_summary(requests, order),
        "warmup_failures": failure_summary(requests, order, warmup=True)
        | records_summary(executors),
        "traced_failures": list(profiled.trace.failures if profiled.trace else []),
        "throughput_items_per_s": throughput_items_per_s(requests, meta.kind),
        "noise": noise_summary(meta),
        "quantization": profiled.quantization.to_dict() if profiled.quantization else None,
        "fingerprint": fingerprint.to_dict() if fingerprint else None,
    }


def percentile_request_parts(run, percentiles=(50, 99)) -> pd.DataFrame:
    """The measured successful request at each percentile of end to end, with its own stage times (ms).

    One row per percentile: ``percentile``, ``request``, one ``<stage>`` column per stage
    (pipeline order), ``unattributed`` and ``end_to_end``. The request is the nearest-rank
    order statistic (rank ``ceil(q/100 * n)``, ties by request id), so its stages and
    unattributed add up to its end to end exactly (each stage's own p99, stacked, does not).
    """
    order = list(run.stage_names)
    wide = stage_matrix(run.requests, run.stages, order)
    columns = ["percentile", "request", *order, UNATTRIBUTED, END_TO_END]
    if wide.empty:
        return pd.DataFrame(columns=columns)
    wide = wide.reset_index().sort_values([END_TO_END, "request"], kind="stable")
    rows = []
    for q in percentiles:
        r = wide.iloc[max(int(np.ceil(q / 100 * len(wide))) - 1, 0)]
        # a stage the request did not run is 0 ms; end to end is always there
        ms = {name: 0.0 if pd.isna(r[name]) else int(r[name]) / NS_PER_MS for name in columns[2:]}
        rows.append({"percentile": q, "request": int(r["request"])} | ms)
    return pd.DataFrame(rows, columns=columns)
