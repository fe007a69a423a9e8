"""The "why" half of ``show --json``: tail attribution, attribute effects, GC pauses, cold start, memory.

Each key is computed from the run alone (tables and meta), so it works on any
saved run; a key whose data the run did not record is None (older runs, CUDA
runs for ``gc``), never missing.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from .attributes import attribute_effects, effect_sentence, ranked_effects
from .gc_pauses import gc_summary
from .tail import tail_attribution


def explain_keys(meta, requests: pd.DataFrame, stages: pd.DataFrame, order: list[str]) -> dict[str, Any]:
    """``tail``, ``attributes``, ``attributes_summary``, ``gc``, ``cold_start``, ``memory_by_stage`` of a run
    (see docs/json.md)."""
    effects = attribute_effects(requests, stages, order)
    return {
        "tail": tail_attribution(requests, stages, order),
        "attributes": effects,
        "attributes_summary": None if effects is None else {
            "headline": effect_sentence(effects), "ranking": ranked_effects(effects),
            "errors": dict(((meta.get("attributes") or {}).get("errors")) or {})},
        "gc": gc_summary(requests, stages, order),
        "cold_start": meta.get("cold_start"),
        "memory_by_stage": (meta.get("trace") or {}).get("memory_by_stage"),
    }
