"""``workbench ingest-otel FILE|DIR [--stage-map span=stage ...]``: production spans as a run."""

from __future__ import annotations

import sys
from pathlib import Path

from workbench.cli.output import check_out, default_folder, dumps, save_measured
from workbench.analysis.budget import budget
from ..otel.ingest import ingest_otel, parse_stage_map
from workbench.cli.show import print_budget


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ingest-otel",
        help="turn OTLP/JSON span exports into a run (budget, percentiles)",
        description="A request is a root span; a stage is the union of its mapped child spans; "
        "the rest is unattributed. Input: the OpenTelemetry Collector file "
        "exporter's format (one ExportTraceServiceRequest per line).",
    )
    p.add_argument(
        "path",
        type=Path,
        metavar="FILE|DIR",
        help="an OTLP/JSON file, or a folder of .json/.jsonl files",
    )
    p.add_argument(
        "--stage-map",
        nargs="+",
        default=[],
        metavar="SPAN=STAGE",
        help="span name -> stage (any depth under the root); default: each child of the root is a stage",
    )
    p.add_argument("--out", type=Path, help="run folder to write (default runs/otel-NAME-TIME)")
    p.add_argument("--json", action="store_true", help="print the budget as one JSON object")
    p.set_defaults(func=run_ingest_command)


def run_ingest_command(args) -> int:
    stage_map = parse_stage_map(args.stage_map)
    run = ingest_otel(args.path, stage_map)
    out = args.out or default_folder("otel", str(run.meta.pipeline))
    check_out(out, folder=True)
    ingest = run.meta.ingest
    # span names the stage map matched (mapped stage names appear as stages)
    matched = {span for span, stage in ingest.stage_map.items() if stage in run.stage_names}
    unused = sorted(set(stage_map) - matched)
    path = save_measured(run, out)
    report = budget(run)
    if args.json:
        fields = ("spans", "requests", "dropped", "clamped", "flagged")
        checked = {k: getattr(ingest, k) for k in fields}
        print(
            dumps(report | {"run_dir": str(path), "unmatched_stage_map": unused, "ingest": checked})
        )
    else:
        print_budget(report, sys.stdout)
        if unused:
            print(f"--stage-map: no span named {', '.join(unused)} under any request")
        if ingest.dropped or ingest.clamped:
            print(f"spans checked: {tree_note(ingest)}")
        print(f"\nrun written to {path}")
    return 0 if run.requests["ok"].any() else 1


def tree_note(ingest) -> str:
    """One line: how many spans were dropped or clamped, why, and the names of some of them."""
    parts = [f"{n} dropped ({why})" for why, n in ingest.dropped.items()]
    parts += [f"{n} clamped ({why})" for why, n in ingest.clamped.items()]
    names = f"; spans named {', '.join(map(repr, ingest.flagged[:5]))}" if ingest.flagged else ""
    return f"{ingest.spans} spans, " + ", ".join(parts) + names
