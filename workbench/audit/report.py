"""The audit document: JSON for scripts, one self-contained HTML file for people (plotly.js
embedded once, no outside request: it opens offline and prints), in the audit's four phases; and
the facts the rules read about a run, gathered once (:func:`run_facts`: pandas, no torch or plotly).
"""

from __future__ import annotations

import html
import math
from typing import Any

from ..analysis.budget import END_TO_END, EXTRA_TAIL, budget, stage_matrix
from ..analysis.flame import flame_tree, library_shares
from ..analysis.periodic import periodic_spikes
from ..analysis.stats import far_tail_text, percentiles
from ..analysis.trace_report import analyze
from ..errors import TraceError
from ..record.meta import ServedMeta, profile_part
from ..roles import decide_roles
from ..trace import load_trace
from ..units import ms_to_ns, ns_to_ms
from . import rules
from .trial import try_actions as measure

FORMAT = "workbench.audit"
VERSION = 1


def audit_run(
    run,
    sla_ms: float | None = None,
    *,
    try_actions: bool = False,
    try_requests: int = 200,
    compare_fn=None,
    facts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One run's audit entry (``try_actions``: measure what :mod:`workbench.audit.trial` can)."""
    facts = facts if facts is not None else run_facts(run)
    found = rules.findings(facts)
    for f in found:
        _add_estimates(run, facts, f)
    trials = (
        measure(run, found, requests=try_requests, compare_fn=compare_fn) if try_actions else []
    )
    baseline = _baseline(facts, sla_ms)
    return {
        "run": facts["run"],
        "label": facts["label"],
        "sla_ms": sla_ms,
        "summary": summary(facts, baseline, found, sla_ms),
        "baseline": baseline,
        "findings": found,
        "notes": _notes(facts),
        "trials": trials,
    }


def audit(runs, sla_ms: float | None = None, facts: list | None = None, **kwargs) -> dict[str, Any]:
    """The JSON of ``python -m workbench audit --json``; ``facts``: each run's :func:`run_facts`
    when already gathered (kwargs: see :func:`audit_run`)."""
    entries = [
        audit_run(r, sla_ms, facts=f, **kwargs) for r, f in zip(runs, facts or [None] * len(runs))
    ]
    return {"format": FORMAT, "version": VERSION, "runs": entries}


def run_facts(run) -> dict[str, Any]:
    """What the rules read about a loaded run (``workbench.record.Run``): plain JSON-type dicts but
    ``loaded_trace``, kept for the evidence figures."""
    report = budget(run)
    trace, trace_error, libraries, loaded = None, None, {}, None
    if run.trace_path is not None:
        try:
            loaded = load_trace(run.trace_path)
            trace = analyze(loaded)
            libraries = library_shares(flame_tree(loaded.events))
        except TraceError as exc:  # a broken trace loses the trace findings, never the audit
            trace_error = str(exc)
    meta, profiled = run.meta, profile_part(run.meta)
    serving = meta.serving if isinstance(meta, ServedMeta) else None
    load = getattr(meta, "load", None)  # load and served runs
    decisions = decide_roles(run.stage_names, dict(profiled.stage_roles or {}), libraries)
    return {
        "run": str(run.path) if run.path else None,
        "label": run.label,
        "budget": report,
        "tail": report["tail"],  # the budget's explanations: each computed once per audit
        "trace": trace,
        "trace_error": trace_error,
        "traced_requests": profiled.trace.requests if profiled.trace else None,
        "roles": {s: d.role for s, d in decisions.items() if d.role},
        "role_decisions": {s: d.to_dict() for s, d in decisions.items()},
        "libraries": libraries,
        "loaded_trace": loaded,  # the Trace itself, for the evidence figures (never in the audit's output)
        "noise": meta.noise.to_dict() if meta.noise else None,
        "gc": report["gc"],
        "blocking": report["head_of_line"],
        "stacks": profiled.stacks,
        "waits": report.get("waits"),
        "pacing": meta.timing.pacing if meta.timing else None,
        "periodic": periodic_spikes(run.requests, run.stages, run.stage_names),
        "serving_gc": serving.gc if serving else None,
        "policy": (load.policy if load else None) or (serving.policy if serving else None),
    }


def timeout_estimate(run, stage: str, timeout_ms: float) -> dict[str, Any]:
    """End-to-end p50/p99 if ``stage`` were cut off at ``timeout_ms``, estimated from the recorded
    times: a timed-out call returns at once, so each request loses ``max(0, stage - timeout)``."""
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


def _baseline(facts: dict[str, Any], sla_ms: float | None) -> dict[str, Any]:
    b = facts["budget"]
    e2e = b["end_to_end"]
    noise = facts.get("noise") or {}
    return {
        "requests": e2e["count"],
        "end_to_end": {
            k: e2e.get(k) for k in ("p50_ms", "p95_ms", "p99_ms", "p99_ci_low_ms", "p99_ci_high_ms")
        }
        | {k: e2e.get(k) for k in EXTRA_TAIL + ["max_ms"]},
        "sla_miss": None if sla_ms is None or e2e.get("p99_ms") is None else e2e["p99_ms"] > sla_ms,
        "errors": b.get("errors", {}),
        "noisy": noise.get("noisy"),
        "noise_reasons": noise.get("reasons", []),
    }


def _add_estimates(run, facts: dict[str, Any], finding: dict) -> None:
    """A timeout's gain on a remote or I/O stage cannot be tried here: estimate it from the recorded times."""
    stage = finding.get("stage")
    role = rules.stage_role(stage, facts.get("roles")) if stage else None
    if finding["kind"] not in ("remote", "tail") or role not in ("remote", "io"):
        return
    row = next(s for s in facts["budget"]["stages"] if s["name"] == stage)
    if not row.get("p95_ms"):
        return
    est = timeout_estimate(run, stage, round_timeout_ms(row["p95_ms"]))
    p99_ms = facts["budget"]["end_to_end"]["p99_ms"]
    if not est["timed_out_share"] or est["p99_ms"] >= 0.95 * p99_ms:
        return  # a timeout that changes nothing is no advice
    for action in finding["actions"]:
        if "timeout" in action["title"].lower():
            action["estimate"] = est
            return
    title, why = f"Put a timeout on {stage}", "bounds the stage's tail"
    finding["actions"].append({"title": title, "why": why, "try": None, "estimate": est})


def summary(
    facts: dict[str, Any], baseline: dict[str, Any], found: list[dict], sla_ms: float | None = None
) -> str:
    """The short paragraph at the top: SLA, where the tail is, the best estimated or measured gain."""
    p99 = baseline["end_to_end"]["p99_ms"]
    parts = []
    if p99 is None:
        return "no successful measured request: nothing to audit (see the failures)"
    if baseline["sla_miss"] is None:
        parts.append(f"p99 {p99:.3g} ms (no SLA given)")
    else:
        verb = "misses" if baseline["sla_miss"] else "meets"
        parts.append(f"p99 {p99:.3g} ms {verb} the {sla_ms:g} ms SLA")
    # the heaviest finding on why the tail waited or grew (off CPU: the noise note says it)
    kinds = {*rules.WAIT_KIND.values(), "attribute", "periodic"} - {"off_cpu"}
    headline = next((f["evidence"] for f in found if f["kind"] in kinds), None)
    if headline:
        parts.append(headline)
    slowest = rules.slowest_set(facts["tail"])
    if slowest is not None and not headline:
        shares = slowest[2]["shares"]
        top = max(shares, key=shares.get)
        parts.append(f"{shares[top]:.0%} of the slowest {slowest[1]} is {top}")
    for f in found:
        est = next((a["estimate"] for a in f["actions"] if a.get("estimate")), None)
        if est and est.get("p99_ms") is not None:
            parts.append(
                f"a {est['timeout_ms']:g} ms timeout on {est['stage']} would give p99 about "
                f"{est['p99_ms']:.3g} ms (estimate)"
            )
            break
    # the measured action with the largest real p50 gain ("faster" verdicts only)
    measured = [
        a["measured"]
        for f in found
        for a in f["actions"]
        if (a.get("measured") or {}).get("verdict") == "faster"
    ]
    if measured:
        best = min(measured, key=lambda m: m["p50_ratio"])
        parts.append(f"measured: {best['sentence']}")
    if baseline.get("noisy"):
        parts.append("the run was noisy: " + "; ".join(baseline["noise_reasons"]))
    return "; ".join(parts)


def _notes(facts: dict[str, Any]) -> list[str]:
    notes = list(facts["tail"].get("notes") or [])
    if facts["budget"].get("waits_note"):
        notes.append(facts["budget"]["waits_note"])
    decisions = [rules.role_decision(s, facts) for s in facts.get("role_decisions") or {}]
    notes += [d.sentence for d in decisions if d.sentence]  # evidence overruled a stage's name
    if facts.get("trace_error"):
        notes.append(f"trace not analysed: {facts['trace_error']}")
    elif facts.get("trace") is None:
        notes.append("no trace in this run: launch, transfer and sync rules not applied")
    return notes


# --------------------------------------------------------------------------- HTML

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;color:#222;line-height:1.45}
h1{font-size:1.7em} h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:1.6em} h3{margin-bottom:.3em}
.summary{font-size:1.2em;background:#f4f6fa;border-left:6px solid #3366cc;padding:.8em 1em}
.finding{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:.6em 0}
.kind{display:inline-block;background:#3366cc;color:#fff;border-radius:4px;padding:0 .5em;font-size:.85em}
.estimate{color:#8a5a00} table{border-collapse:collapse} td,th{padding:.2em .7em;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left} .noisy{color:#b00;font-weight:bold}
@media print{.figure{page-break-inside:avoid} body{max-width:none}}
"""


def render_html(doc: dict[str, Any], figures: dict[str, list[tuple[str, Any]]]) -> str:
    """The report page; ``figures`` maps a run folder to ``[(caption, go.Figure)]``."""
    import plotly.io as pio  # plotly (the ui extra, 30 ms): only the HTML report; --json runs without it
    from plotly.offline import get_plotlyjs

    body = [
        f"<h1>Latency audit</h1><p>{len(doc['runs'])} run(s). Generated by the Inference Latency Workbench; "
        "every number below comes from the runs and their traces; estimates are labelled.</p>",
        *(_run_html(entry, figures.get(entry["run"], []), pio) for entry in doc["runs"]),
    ]
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Latency audit</title>"
        f"<style>{CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        + "\n".join(body)
        + "</body></html>"
    )


def _run_html(entry: dict[str, Any], figs: list[tuple[str, Any]], pio) -> str:
    e = html.escape
    b = entry["baseline"]
    out = [
        f"<h2>{e(entry['label'])}</h2><p><code>{e(str(entry['run']))}</code></p>",
        f"<p class='summary'>{e(entry['summary'])}</p>",
        "<h3>1. Baseline</h3>",
        _baseline_table(b),
    ]
    if b.get("noisy"):
        out.append(f"<p class='noisy'>Noisy run: {e('; '.join(b['noise_reasons']))}</p>")
    out.append("<h3>2. Bottleneck</h3>")
    out += [_finding_html(f) for f in entry["findings"]] or ["<p>No rule fired.</p>"]
    out.append("<h3>3. Evidence</h3>")
    options = {"full_html": False, "include_plotlyjs": False, "config": {"displaylogo": False}}
    for caption, fig in figs:
        drawn = pio.to_html(fig, **options)
        out.append(f"<div class='figure'><p><b>{e(caption)}</b></p>{drawn}</div>")
    out.append("<h3>4. Actions</h3><ol>")
    for f in entry["findings"]:
        for a in f["actions"]:
            out.append(
                f"<li><b>{e(a['title'])}</b> ({e(f['kind'])}{', ' + e(f['stage']) if f.get('stage') else ''})"
                f": {e(a['why'])}{_gain_html(a)}</li>"
            )
    out.append("</ol>")
    out += [f"<p><i>{e(n)}</i></p>" for n in entry.get("notes", [])]
    return "\n".join(out)


def baseline_far_tail(b: dict[str, Any]) -> str:
    """The baseline's p99.9 and max line (``analysis.budget.far_tail_text``); "" for no request."""
    return far_tail_text(b["end_to_end"] | {"count": b["requests"]})


def _baseline_table(b: dict[str, Any]) -> str:
    e2e = b["end_to_end"]
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    ci = f"[{fmt(e2e['p99_ci_low_ms'])}, {fmt(e2e['p99_ci_high_ms']) if e2e['p99_ci_high_ms'] is not None else 'unbounded'}]"
    sla = {None: "no SLA given", True: "MISSED", False: "met"}[b["sla_miss"]]
    return (
        f"<table><tr><th>requests</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>p99 95% CI</th><th>SLA</th></tr>"
        f"<tr><td>{b['requests']}</td><td>{fmt(e2e['p50_ms'])}</td><td>{fmt(e2e['p95_ms'])}</td>"
        f"<td>{fmt(e2e['p99_ms'])}</td><td>{ci}</td><td>{sla}</td></tr></table>"
        f"<p>{html.escape(baseline_far_tail(b))}</p>"
    )


def _finding_html(f: dict) -> str:
    e = html.escape
    stage = f" in <b>{e(f['stage'])}</b>" if f.get("stage") else ""
    return f"<div class='finding'><span class='kind'>{e(f['kind'])}</span>{stage}: {e(f['evidence'])}</div>"


def _gain_html(action: dict) -> str:
    est = action.get("estimate")
    if est and est.get("p99_ms") is not None:
        return (
            f" <span class='estimate'>Estimate from the recorded times (not measured): a {est['timeout_ms']:g} ms "
            f"timeout gives p50 about {est['p50_ms']:.3g} ms, p99 about {est['p99_ms']:.3g} ms "
            f"({est['timed_out_share']:.1%} of requests cut off).</span>"
        )
    measured = action.get("measured")
    if measured:
        return f" <b>Measured:</b> {html.escape(measured['sentence'])}"
    if action.get("simulated"):
        return f" <span class='estimate'>{html.escape(action['simulated']['sentence'])}.</span>"
    if action.get("not_tried"):
        return f" <i>(not tried: {html.escape(action['not_tried'])})</i>"
    return ""
