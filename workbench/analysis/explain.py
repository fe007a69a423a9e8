"""The "why" half of ``show --json``: tail attribution, the slow requests' stacks, attribute effects, head-of-line
blocking, GC pauses, cold start, memory.

Each key is computed from the run alone (tables and meta), so it works on any
saved run; a key whose data the run did not record is None (older runs, CUDA
runs for ``gc``), never missing.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..record.meta import ProfileMeta, RunMeta
from .attributes import attribute_effects, effect_sentence, ranked_effects
from .blocking import head_of_line
from .gc_pauses import gc_summary
from .tail import tail_attribution
from .waits import wait_summary, waits_note


def explain_keys(
    meta: RunMeta, requests: pd.DataFrame, stages: pd.DataFrame, order: list[str]
) -> dict[str, Any]:
    """``tail``, ``stacks``, ``waits``, ``waits_note``, ``attributes``, ``attributes_summary``,
    ``head_of_line``, ``gc``, ``cold_start``, ``memory_by_stage`` of a run (see docs/json.md)."""
    effects = attribute_effects(requests, stages, order)
    profiled = meta if isinstance(meta, ProfileMeta) else ProfileMeta()
    sampled = getattr(meta, "sampled", None)  # profile, load and served runs
    return {
        "tail": tail_attribution(requests, stages, order),
        "stacks": recorded_stacks(meta),
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


def recorded_stacks(meta: RunMeta) -> dict[str, Any] | None:
    """The timing run's stack summary (:mod:`workbench.analysis.stacks`), as the runner recorded it;
    None for runs without one."""
    return meta.stacks if isinstance(meta, ProfileMeta) else None
