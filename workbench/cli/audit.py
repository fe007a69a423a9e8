"""``workbench audit RUN [RUN ...] [--sla-ms X] (--out report.html | --json)``: findings with evidence and actions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .output import add_number, check_out, dumps, number
from ..batching.capacity import is_sweep, read_sweep
from ..audit.report import audit, baseline_far_tail, render_html, run_facts
from ..record import load_run
from ..record.folder import write_text_atomically
from ..analysis.attributes import attribute_effects, ranked_effects
from ..analysis.traced_tail import slow_minus_median, tail_views, views_sentence
from ..analysis.waits import wait_flames
from ..plots import launch_figure, trace_flame_figure, transfer_figure
from ..plots.budget import run_budget_figure
from ..plots.flame import differential_flame_figure, traced_tail_figure, wait_flame_figure
from ..plots.distributions import survival_figure
from ..plots.tail import attribute_figure, latency_over_run_figure, tail_figure
from ..trace import load_trace

SLA_MS = number("--sla-ms", 0, 3_600_000, "ms", lo_open=True)
TRY_REQUESTS = number("--try-requests", 20, 10**6, "requests", integer=True)  # 2 blocks of 10


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "audit",
        help="audit saved runs: baseline, bottleneck, evidence, actions",
        description="Write an offline audit of saved runs: one self-contained HTML file or JSON.",
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run folders")
    add_number(p, SLA_MS, None, "end-to-end p99 target")
    p.add_argument(
        "--try",
        dest="try_actions",
        action="store_true",
        help="measure the actions the workbench can make itself (precision, batch size, threads) "
        "with the interleaved comparison",
    )
    p.add_argument(
        "--try-requests",
        type=TRY_REQUESTS,
        default=200,
        metavar="N",
        help="measured requests per configuration for --try (default 200)",
    )
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--out", type=Path, help="HTML file to write (opens offline)")
    out.add_argument("--json", action="store_true", help="print the audit as one JSON object")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.out is not None:
        check_out(args.out, folder=False)
    paths = []  # a sweep folder: each of its point runs, in sweep order
    for path in args.runs:
        paths += [path / p["run"] for p in read_sweep(path)["points"]] if is_sweep(path) else [path]
    runs = [load_run(p) for p in paths]
    facts = [run_facts(r) for r in runs]  # once: the findings and the figures read the same facts
    options = {"try_actions": args.try_actions, "try_requests": args.try_requests}
    doc = audit(runs, args.sla_ms, facts, **options)
    if args.json:
        print(dumps(doc, indent=2))
        return 0
    figures = {str(r.path): run_figures(r, f, args.sla_ms) for r, f in zip(runs, facts)}
    write_text_atomically(args.out, render_html(doc, figures))
    print(f"audit of {len(runs)} run(s) written to {args.out}")
    for entry in doc["runs"]:
        print(f"  {entry['label']}: {entry['summary']}")
        far = baseline_far_tail(entry["baseline"])
        if far:
            print(f"    end to end {far}")
    return 0


# -- the evidence figures of one run's audit (plotly: the rules and the JSON never draw) ------------


def run_figures(run, facts: dict[str, Any], sla_ms: float | None = None) -> list[tuple[str, Any]]:
    """``[(caption, figure)]`` of the run, then of its trace."""
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
    effects = attribute_effects(run.requests, run.stages, run.stage_names)
    ranked = ranked_effects(effects)
    if ranked:  # the attribute that explains the most stage time (the pipeline declared describe=)
        stage, attribute = ranked[0]["stage"], ranked[0]["attribute"]
        effect = effects[stage][attribute]
        fig = attribute_figure(run.requests, run.stages, stage, attribute, effect=effect)
        figs.append((f"What {stage}'s time tracks", fig))
    if (facts.get("stacks") or {}).get("headline"):
        caption = "The slowest requests' sampled stacks against the median ones (slow minus median)"
        figs.append((caption, differential_flame_figure(facts["stacks"])))
    if facts.get("waits"):  # the slowest requests' sampled work beside their waits
        flames = wait_flames(
            getattr(run.meta, "sampled", None),  # profile, load and served runs
            run.requests,
            run.stages,
            run.stage_names,
            getattr(run.meta, "pipeline_stages", None),
        )
        caption = "The slowest requests' work beside their waits (slow minus median, every thread sampled)"
        figs.append((caption, wait_flame_figure(flames)))
    if facts.get("trace") is not None:
        trace = facts.get("loaded_trace") or load_trace(run.trace_path)  # one Trace for every view
        gpu = views_sentence(tail_views(trace))  # the slowest traced requests' launches and copies
        tail = "The slowest traced requests against the median ones" + (f" ({gpu})" if gpu else "")
        figs += [
            (
                "Flame graph of the traced requests: stage -> operators -> kernels and copies",
                trace_flame_figure(trace),
            ),
            ("Kernel launches: launch delay and CPU vs GPU time", launch_figure(trace)),
            ("Host<->device copies by kind and host memory", transfer_figure(trace)),
            (tail, traced_tail_figure(slow_minus_median(trace))),
        ]
    return figs
