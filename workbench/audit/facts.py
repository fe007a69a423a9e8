"""Everything the audit rules read about one run, gathered once.

Plain dicts of JSON types (the budget, the tail attribution, the trace report, the stages' roles,
head-of-line blocking, GC pauses, the batching policy, the run's kind), except ``loaded_trace``,
kept so the evidence figures do not read the file again. Building them needs pandas but neither
torch nor plotly, so the audit runs where the run was copied to.
"""

from __future__ import annotations

import math
from typing import Any

from ..analysis.budget import END_TO_END, budget, stage_matrix
from ..analysis.explain import recorded_stacks
from ..analysis.flame import flame_tree
from ..analysis.periodic import periodic_spikes
from ..analysis.python_frames import library_shares
from ..analysis.stats import percentiles
from ..analysis.trace_report import analyze
from ..errors import TraceError
from ..record.meta import ProfileMeta, ServedMeta
from ..roles import decide_roles
from ..trace import load_trace
from ..units import ms_to_ns, ns_to_ms


def run_facts(run) -> dict[str, Any]:
    """The facts of a loaded run (``workbench.record.Run``)."""
    report = budget(run)
    trace, trace_error, libraries, loaded = None, None, {}, None
    if run.trace_path is not None:
        try:
            loaded = load_trace(run.trace_path)
            trace = analyze(loaded)
            libraries = library_shares(flame_tree(loaded.events))
        except TraceError as exc:  # a broken trace loses the trace findings, never the audit
            trace_error = str(exc)
    meta = run.meta
    profiled = meta if isinstance(meta, ProfileMeta) else ProfileMeta()
    serving = meta.serving if isinstance(meta, ServedMeta) else None
    load = getattr(meta, "load", None)  # load and served runs
    recorded_roles = dict(profiled.stage_roles or {})
    decisions = decide_roles(run.stage_names, recorded_roles, libraries)
    return {
        "run": str(run.path) if run.path else None,
        "kind": meta.kind,
        "label": run.label,
        "budget": report,
        "tail": report["tail"],  # the budget's explanations: each computed once per audit
        "trace": trace,
        "trace_error": trace_error,
        "traced_requests": profiled.trace.requests if profiled.trace else None,
        "roles": {s: d.role for s, d in decisions.items() if d.role},
        "recorded_roles": recorded_roles,
        "role_decisions": {s: d.to_dict() for s, d in decisions.items()},
        "libraries": libraries,
        "loaded_trace": loaded,  # the Trace itself, for the evidence figures (never in the audit's output)
        "noise": meta.noise.to_dict() if meta.noise else None,
        "gc": report["gc"],
        "blocking": report["head_of_line"],
        "stacks": recorded_stacks(meta),
        "waits": report.get("waits"),
        "pacing": meta.timing.pacing if meta.timing else None,
        "periodic": periodic_spikes(run.requests, run.stages, run.stage_names),
        "serving_gc": serving.gc if serving else None,
        "policy": (load.policy if load else None) or (serving.policy if serving else None),
    }


def timeout_estimate(run, stage: str, timeout_ms: float) -> dict[str, Any]:
    """End-to-end p50/p99 if ``stage`` were cut off at ``timeout_ms`` (an estimate, not a measurement).

    Assumes a timed-out call returns at once with a fallback answer: each
    request's end to end loses ``max(0, stage - timeout)``. Computed from the
    recorded distribution only.
    """
    wide = stage_matrix(run.requests, run.stages, run.stage_names)
    out = {"stage": stage, "timeout_ms": timeout_ms}
    if wide.empty or stage not in wide:
        return out | dict.fromkeys(("p50_ms", "p99_ms", "timed_out_share"))
    over = (wide[stage].fillna(0) - ms_to_ns(timeout_ms)).clip(lower=0)
    e2e = (wide[END_TO_END] - over).to_numpy(dtype=float)
    p50, p99 = percentiles(e2e, [50, 99])
    return out | {
        "p50_ms": ns_to_ms(float(p50)),
        "p99_ms": ns_to_ms(float(p99)),
        "timed_out_share": float((over > 0).mean()),
        "estimate": True,
    }


def round_timeout_ms(value_ms: float) -> float:
    """A readable timeout near ``value_ms``: 1, 2 or 5 times a power of ten."""
    if value_ms <= 0 or not math.isfinite(value_ms):
        return value_ms
    exp = math.floor(math.log10(value_ms))
    for step in (1, 2, 5, 10):
        if step * 10**exp >= value_ms:
            return float(step * 10**exp)
    return float(10 ** (exp + 1))
