"""Failed requests, summarised so that no failure goes unseen (``error_where``: ``file:line in
function`` of the innermost user frame); and throughput."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..units import NS_PER_S

_KEY = ["error_type", "error_message", "error_where"]


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
