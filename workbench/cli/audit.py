"""``workbench audit RUN [RUN ...] [--sla-ms X] (--out report.html | --json)``: findings with evidence and actions."""

from __future__ import annotations

from pathlib import Path

from .output import add_number, check_out, dumps, number
from ..batching.capacity import is_sweep, read_sweep
from ..audit.report import audit, baseline_far_tail, render_html, run_facts
from ..record import load_run
from ..audit.figures import run_figures
from ..record.folder import write_text_atomically

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
