"""The evidence figures of one run's audit (imports plotly; the rules never do)."""

from __future__ import annotations

from typing import Any

from ..analysis.attributes import attribute_effects, ranked_effects
from ..analysis.traced_tail import slow_minus_median, tail_views, views_sentence
from ..analysis.waits import wait_flames
from ..plots import launch_figure, trace_flame_figure, transfer_figure
from ..plots.budget import run_budget_figure
from ..plots.flame import differential_flame_figure, traced_tail_figure
from ..plots.distributions import survival_figure
from ..plots.tail import attribute_figure, latency_over_run_figure, tail_figure
from ..plots.flame import wait_flame_figure
from ..trace import load_trace


def run_figures(run, facts: dict[str, Any], sla_ms: float | None = None) -> list[tuple[str, Any]]:
    """``[(caption, figure)]``: budget (noise badge, failures, SLA), the far tail (survival), tail attribution,
    latency over the run, the attribute that explains the most, then the trace's views."""
    figs = [
        ("Budget: p50/p95/p99 per stage", run_budget_figure(run, sla_ms=sla_ms)),
        (
            "Far tail: the share of requests at least this slow, with p99 and p99.9 (log scales)",
            survival_figure(run.requests, run.stages, run.stage_names),
        ),
        (
            "Tail attribution: each stage's share of the slowest requests against the median ones",
            tail_figure(facts["tail"]),
        ),
        ("Latency over the run: drift, spikes, throttling", latency_over_run_figure(run.requests)),
    ]
    figs += _attribute_figures(run)
    if (facts.get("stacks") or {}).get("headline"):
        caption = "The slowest requests' sampled stacks against the median ones (slow minus median)"
        figs.append((caption, differential_flame_figure(facts["stacks"])))
    if facts.get("waits"):
        figs.append(_wait_flames(run))
    if facts.get("trace") is not None:
        trace = facts.get("loaded_trace") or load_trace(run.trace_path)  # one Trace for every view
        figs += [*_trace_figures(trace), _traced_tail(trace)]
    return figs


def _attribute_figures(run) -> list[tuple[str, Any]]:
    """The attribute that explains the most stage time, drawn with its ranges, when the pipeline declared describe=."""
    effects = attribute_effects(run.requests, run.stages, run.stage_names)
    ranked = ranked_effects(effects)
    if not ranked:
        return []
    stage, attribute = ranked[0]["stage"], ranked[0]["attribute"]
    effect = effects[stage][attribute]
    fig = attribute_figure(run.requests, run.stages, stage, attribute, effect=effect)
    return [(f"What {stage}'s time tracks", fig)]


def _wait_flames(run) -> tuple[str, Any]:
    """The slowest requests' sampled work beside their waits (every thread sampled)."""
    meta = run.meta
    flames = wait_flames(
        getattr(meta, "sampled", None),  # profile, load and served runs
        run.requests,
        run.stages,
        run.stage_names,
        getattr(meta, "pipeline_stages", None),
    )
    caption = (
        "The slowest requests' work beside their waits (slow minus median, every thread sampled)"
    )
    return (caption, wait_flame_figure(flames))


def _traced_tail(trace) -> tuple[str, Any]:
    """The slowest traced requests' flame graph against the median ones', with how many it rests on; the caption
    adds their launches and copies per request (``traced_tail.tail_views``) when the trace has any."""
    gpu = views_sentence(tail_views(trace))
    caption = "The slowest traced requests against the median ones" + (f" ({gpu})" if gpu else "")
    return (caption, traced_tail_figure(slow_minus_median(trace)))


def _trace_figures(events) -> list[tuple[str, Any]]:
    return [
        (
            "Flame graph of the traced requests: stage -> operators -> kernels and copies",
            trace_flame_figure(events),
        ),
        ("Kernel launches: launch delay and CPU vs GPU time", launch_figure(events)),
        ("Host<->device copies by kind and host memory", transfer_figure(events)),
    ]
