"""``workbench show RUN_DIR``: print the latency budget of a saved run."""
from __future__ import annotations

import json
import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("show", help="print the per-stage budget of a run folder")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..analysis.budget import budget
    from ..record import load_run

    r = load_run(args.run_dir)
    report = budget(r.meta, r.requests, r.stages)
    if args.json:
        print(json.dumps(report))
    else:
        print_budget(report, sys.stdout)
    return 0


def _fmt(value, width=9) -> str:
    return f"{value:{width}.3f}" if value is not None else f"{'-':>{width}}"


def print_budget(report: dict, out) -> None:
    """A fixed-width table: one line per stage, then unattributed and end to end."""
    cfg = report["config"]
    print(f"{report['pipeline']}  device={cfg.get('device')}  batch_size={cfg.get('batch_size')}  "
          f"precision={cfg.get('precision')}  ({report['end_to_end']['count']} requests, ms)", file=out)
    device = any("device" in s for s in report["stages"])
    head = f"{'stage':<16}{'count':>7}{'mean':>9}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}{'share':>8}{'errors':>8}"
    print(head + (f"{'gpu p50':>9}{'gpu p99':>9}" if device else ""), file=out)
    for s in report["stages"]:
        line = (f"{s['name']:<16}{s['count']:>7}{_fmt(s['mean_ms'])}{_fmt(s['p50_ms'])}{_fmt(s['p95_ms'])}"
                f"{_fmt(s['p99_ms'])}{_fmt(s['max_ms'])}{_share(s['share'])}{report['errors'][s['name']]:>8}")
        if device:
            line += _fmt(s["device"]["p50_ms"]) + _fmt(s["device"]["p99_ms"])
        print(line, file=out)
    for label, key in (("(unattributed)", "unattributed"), ("end to end", "end_to_end")):
        e = report[key]
        share = _share(e["mean_ms"] / report["end_to_end"]["mean_ms"]) if key == "unattributed" and e["mean_ms"] is not None and report["end_to_end"]["mean_ms"] else f"{'':>8}"
        print(f"{label:<16}{e['count']:>7}{_fmt(e['mean_ms'])}{_fmt(e['p50_ms'])}{_fmt(e['p95_ms'])}"
              f"{_fmt(e['p99_ms'])}{_fmt(e['max_ms'])}{share}", file=out)
    e2e = report["end_to_end"]
    if e2e.get("p99_ci_low_ms") is not None:
        hi = e2e.get("p99_ci_high_ms")
        print(f"p99 end to end 95% CI: [{e2e['p99_ci_low_ms']:.3f}, {hi:.3f}] ms" if hi is not None else
              f"p99 end to end 95% CI: [{e2e['p99_ci_low_ms']:.3f}, unbounded: too few requests] ms", file=out)
    w = report.get("warmup") or {}
    if w.get("count"):
        print(f"warm-up: {w['count']} requests, first {w['first_ms']:.3f} ms, mean {w['mean_ms']:.3f} ms (not in percentiles)", file=out)


def _share(x) -> str:
    return f"{x * 100:7.1f}%" if x is not None else f"{'-':>8}"
