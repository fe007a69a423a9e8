"""The latency budget, stage by stage: only measured successful requests enter the percentiles;
warm-up is summarized apart and failures counted per stage. ``unattributed`` is end to end minus
the stages, per request (host time between stages: the runner's bookkeeping, Python glue); it is
shown, never hidden. :func:`cache_split` cuts a run by its prediction cache, for two budgets side
by side."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..record import Run
from ..record.meta import RunMeta, profile_part
from ..units import NS_PER_S, ns_to_ms
from .attributes import attribute_effects, effect_sentence, ranked_effects
from .blocking import head_of_line
from .tail import END_TO_END, UNATTRIBUTED, slowest, stage_matrix, tail_attribution
from .tokens import token_summary
from .stats import NS_PER_MS, TAIL_KEYS, percentile_ci_ns, summarize_ns, tail_summary_ns
from .waits import wait_summary, waits_note

SUMMARY_COLUMNS = ["count", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"]
EXTRA_TAIL = [k for k in TAIL_KEYS if k not in SUMMARY_COLUMNS]  # p99.9 and what the max bounds
DEVICE_COLUMNS = ("mean_ms", "p50_ms", "p95_ms", "p99_ms")  # of CUDA-event time, as device_<column>
_KEY = ["error_type", "error_message", "error_where"]


def stage_summary(run) -> pd.DataFrame:
    """Per-stage statistics (ms) of a run's host wall time: a row per stage (pipeline order), then
    ``end_to_end`` and ``unattributed``; ``name``, ``kind``, :data:`SUMMARY_COLUMNS`, ``share`` (of
    the end-to-end mean), ``p99_ci_low_ms``/``p99_ci_high_ms`` (None where unbounded),
    :data:`EXTRA_TAIL` and ``device_<column>`` of :data:`DEVICE_COLUMNS` (None on CPU)."""
    requests, stages, stage_order = run.requests, run.stages, list(run.stage_names)
    host = stage_matrix(requests, stages, stage_order)
    has_device = stages["device_dur_ns"].notna().any()
    device = stage_matrix(requests, stages, stage_order, "device_dur_ns") if has_device else None
    e2e_mean = host[END_TO_END].mean() if len(host) else np.nan
    names = [*stage_order, END_TO_END, UNATTRIBUTED]
    return pd.DataFrame([_summary_row(n, host[n], device, e2e_mean) for n in names])


def _summary_row(
    name: str, host: pd.Series, device: pd.DataFrame | None, e2e_mean: float
) -> dict[str, Any]:
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
    """Warm-up figures: count, failed, and first_ms, mean_ms, max_ms of the successful ones."""
    warm = requests[requests["warmup"].astype(bool)]
    ok = warm["ok"].astype(bool).to_numpy()
    durs = warm["dur_ns"].astype("int64").to_numpy()
    first = float(durs[0]) / NS_PER_MS if durs.size and ok[0] else None
    out = {"count": int(durs.size), "failed": int((~ok).sum()), "first_ms": first}
    stats = summarize_ns(durs[ok])
    return out | {"mean_ms": stats["mean_ms"], "max_ms": stats["max_ms"]}


def budget(run) -> dict[str, Any]:
    """``show --json`` of a run (ms)."""
    units = getattr(run, "units", None)
    meta, requests, stages = run.meta, run.requests, run.stages
    order = list(meta.stages)
    table = stage_summary(run)
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
    profiled = profile_part(meta)
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


def explain_keys(
    meta: RunMeta, requests: pd.DataFrame, stages: pd.DataFrame, order: list[str]
) -> dict[str, Any]:
    """The "why" keys of ``show --json`` (docs/json.md), from the run alone: a key whose data the
    run did not record is None (older runs, CUDA runs for ``gc``), never missing."""
    effects = attribute_effects(requests, stages, order)
    profiled = profile_part(meta)
    sampled = getattr(meta, "sampled", None)  # profile, load and served runs
    return {
        "tail": tail_attribution(requests, stages, order),
        "stacks": profiled.stacks,
        "waits": wait_summary(
            sampled, requests, stages, order, getattr(meta, "pipeline_stages", None)
        ),
        "waits_note": waits_note(meta),
        "attributes": effects,
        "attributes_summary": None
        if effects is None
        else {
            "headline": effect_sentence(effects),
            "ranking": ranked_effects(effects),
            "errors": dict(profiled.attributes.errors if profiled.attributes else {}),
        },
        "head_of_line": head_of_line(requests, stages),
        "gc": gc_summary(requests, stages, order),
        "cold_start": profiled.cold_start.to_dict() if profiled.cold_start else None,
        "memory_by_stage": profiled.trace.memory_by_stage if profiled.trace else None,
    }


def gc_summary(
    requests: pd.DataFrame, stages: pd.DataFrame, stage_order: list[str]
) -> dict[str, Any] | None:
    """GC pauses per stage and their share of the slowest 5 % (``gc`` in docs/json.md), from the
    stages' ``gc_ns`` (:class:`workbench.timing.GcProbe`); None when the run recorded no GC times."""
    if "gc_ns" not in stages.columns or stages["gc_ns"].isna().all():
        return None
    gc_ns = stage_matrix(requests, stages, stage_order, "gc_ns")
    gc_wide = gc_ns[stage_order].fillna(0).astype("int64")
    host = stage_matrix(requests, stages, stage_order)
    per_request = gc_wide.sum(axis=1)
    e2e = host[END_TO_END].astype("int64").rename("e2e_ns").rename_axis("request")
    tail_ids = slowest(e2e, 0.05) if len(e2e) else pd.Index([])
    tail_e2e = float(e2e.loc[tail_ids].sum()) if len(tail_ids) else 0.0
    per_stage = {}
    for s in stage_order:
        stage_time = float(host[s].fillna(0).sum())
        per_stage[s] = {
            "pause_ms_total": ns_to_ms(float(gc_wide[s].sum())),
            "requests_with_gc": int((gc_wide[s] > 0).sum()),
            "share_of_stage_time": float(gc_wide[s].sum()) / stage_time if stage_time else 0.0,
        }
    top = max(stage_order, key=lambda s: per_stage[s]["pause_ms_total"]) if stage_order else None
    tail_gc = float(per_request.loc[tail_ids].sum())
    return {
        "pause_ms_total": ns_to_ms(float(per_request.sum())),
        "requests_with_gc": int((per_request > 0).sum()),
        "requests": int(len(host)),
        "stages": per_stage,
        "share_slowest_5pct": tail_gc / tail_e2e if tail_e2e else 0.0,
        "stage": top if top and per_stage[top]["pause_ms_total"] > 0 else None,
    }


def percentile_request_parts(run, percentiles=(50, 99)) -> pd.DataFrame:
    """Per percentile, the nearest-rank request of end to end (ties by id) with its own stage times
    (ms): ``percentile``, ``request``, ``<stage>``..., ``unattributed``, ``end_to_end``; they add up
    to its end to end exactly (each stage's own p99, stacked, does not)."""
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


def cache_split(run) -> dict:
    """``{"hit": Run, "miss": Run}``: the requests whose whole batch hit a prediction cache
    (``cache_hit``: the fraction it answered), and the rest; each keeps the run's meta."""
    # served runs carry ``cache_hit``; profile runs the describe= attribute ``attr.cache_hit``
    present = [c for c in ("cache_hit", "attr.cache_hit") if c in run.requests.columns]
    column = next((c for c in present if not run.requests[c].isna().all()), None)
    if column is None:
        raise ConfigError(
            f"{run.path or run.label}: no cache_hit column (runs of the tabular example with "
            "--option cache=lru or cache=redis have one)"
        )
    hit = run.requests[column].astype("float64").fillna(0.0) >= 1.0
    parts = {}
    for name, mask in (("hit", hit), ("miss", ~hit)):
        req = run.requests[mask].reset_index(drop=True)
        parts[name] = Run(
            meta=run.meta,
            requests=req,
            stages=run.stages[run.stages["request"].isin(req["request"])],
        )
    return parts


def failure_summary(
    requests: pd.DataFrame, stage_order: list[str], *, warmup: bool = False
) -> dict[str, Any]:
    """Failures per stage: ``{stage: {count, share, messages: [{type, message, where, count}]}}``.

    Measured requests (``warmup=True``: the warm-up ones); ``share`` of that phase's requests (0-1).
    Stages with failures only, pipeline order then any other; messages most frequent first."""
    phase = requests["warmup"].astype(bool) == warmup
    failed = requests[phase & ~requests["ok"].astype(bool)]
    if "error_where" not in failed.columns:  # runs made before it was recorded
        failed = failed.assign(error_where=None)
    total = int(phase.sum())
    out: dict[str, Any] = {}
    stages = [s for s in stage_order if s in set(failed["error_stage"])]
    stages += sorted({str(s) for s in failed["error_stage"]} - set(stages))
    for stage in stages:
        rows = failed[failed["error_stage"] == stage]
        groups = rows.groupby(_KEY, dropna=False, sort=False).size().reset_index(name="count")
        groups = groups.sort_values("count", ascending=False, kind="stable")
        messages = [
            {k: _none(r[f"error_{k}"]) for k in ("type", "message", "where")}
            | {"count": int(r["count"])}
            for _, r in groups.iterrows()
        ]
        out[stage] = {
            "count": int(len(rows)),
            "share": len(rows) / total if total else None,
            "messages": messages,
        }
    return out


def records_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Failure records ``[{stage, type, message, where, count}]`` in :func:`failure_summary`'s
    shape; ``share`` None (no denominator)."""
    out: dict[str, Any] = {}
    for r in records:
        entry = out.setdefault(r["stage"], {"count": 0, "share": None, "messages": []})
        entry["count"] += r["count"]
        entry["messages"].append({k: r[k] for k in ("type", "message", "where", "count")})
    return out


def _none(value):
    return None if value is None or (isinstance(value, float) and value != value) else value


def all_failed(requests: pd.DataFrame) -> bool:
    """True when the run measured requests and every one of them failed."""
    measured = requests[~requests["warmup"].astype(bool)]
    return len(measured) > 0 and not measured["ok"].astype(bool).any()


def any_failed(requests: pd.DataFrame, trace=None) -> bool:
    """True when any request failed: warm-up, measured, or in the traced run (``meta.trace``)."""
    return bool(
        (~requests["ok"].astype(bool)).any() or (trace is not None and trace.failed_requests)
    )


def throughput_items_per_s(requests: pd.DataFrame, kind: str = "profile") -> float | None:
    """Items per second of busy time: items of successful measured requests over their summed
    end to end (s); a load run's row is one item. None when none succeeded."""
    ok = requests[~requests["warmup"].astype(bool) & requests["ok"].astype(bool)]
    busy_ns = int(ok["dur_ns"].astype("int64").sum())
    if ok.empty or busy_ns <= 0:
        return None
    items = len(ok) if kind == "load" else int(ok["batch_size"].astype("int64").sum())
    return items * NS_PER_S / busy_ns


def noise_summary(meta) -> dict[str, Any]:
    """A run's ``noise`` record (``workbench.noise``) for display."""
    return recorded_noise(meta.noise.to_dict() if meta.noise is not None else None)


def recorded_noise(noise: dict[str, Any] | None) -> dict[str, Any]:
    """A ``noise`` object for display; None (a run from before noise was measured) says so."""
    if not noise:
        why = "not recorded (run made before noise was measured)"
        return {"noisy": None, "reasons": [why], "fix": None}
    return dict(noise)
