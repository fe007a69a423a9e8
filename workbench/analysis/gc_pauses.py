"""Garbage-collection pauses per stage, and how much of the tail they make.

Input: a run's tables whose ``stages`` carry ``gc_ns`` (recorded through ``gc.callbacks``:
:class:`workbench.timing.GcProbe`); successful measured requests only. Out: ``gc`` of ``show --json``
(GC in docs/json.md); the audit's ``gc`` rule reads ``share_slowest_5pct``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..units import ns_to_ms
from .matrix import END_TO_END, measured_ok, stage_matrix
from .tail import slowest


def gc_summary(
    requests: pd.DataFrame, stages: pd.DataFrame, stage_order: list[str]
) -> dict[str, Any] | None:
    """The ``gc`` object (module docstring), or None when the run recorded no GC times."""
    if "gc_ns" not in stages.columns or stages["gc_ns"].isna().all():
        return None
    req, st = measured_ok(requests, stages)
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
        "requests": int(len(req)),
        "stages": per_stage,
        "share_slowest_5pct": tail_gc / tail_e2e if tail_e2e else 0.0,
        "stage": top if top and per_stage[top]["pause_ms_total"] > 0 else None,
    }
