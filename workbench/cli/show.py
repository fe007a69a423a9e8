"""``workbench show RUN_DIR``: print the latency budget of a saved run, or the table of a sweep folder
(``load --sweep``; :mod:`workbench.cli.sweep` measures it)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from ..analysis.stats import far_tail_text, requests_to_bound
from ..batching.capacity import compare_sweeps, is_sweep, read_sweep
from ..batching.summary import behind_schedule
from ..errors import ConfigError
from .output import dumps, print_result, strict
from ..analysis.budget import budget, records_summary
from ..record import load_run
from ..analysis.tokens import token_text
from ..noise import noise_line


def register(subparsers) -> None:
    p = subparsers.add_parser("show", help="print the per-stage budget of a run folder")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args) -> int:
    if is_sweep(args.run_dir):  # a sweep folder (load --sweep): its table; each point is a run
        print_result(read_sweep(args.run_dir), args.json, print_sweep)
    else:
        print_result(budget(load_run(args.run_dir)), args.json, print_budget)
    return 0


def _fmt(value) -> str:
    """A figure in ms, ``-`` where there is none (None, or NaN: a stage seen only in failed requests)."""
    return f"{value:.3f}" if _known(value) else "-"


def _known(value) -> bool:
    return value is not None and math.isfinite(value)


def _cells(label: str, summary: dict) -> list[str]:
    """The label, count, mean, p50, p95, p99 and max (ms) cells of one row of the budget table."""
    keys = ("mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms")
    return [label, str(summary["count"]), *(_fmt(summary[k]) for k in keys)]


# the budget table's columns and their narrowest widths; a column widens to its longest cell plus one space
BUDGET_COLUMNS = (
    ("stage", 16),
    ("count", 7),
    ("mean", 9),
    ("p50", 9),
    ("p95", 9),
    ("p99", 9),
    ("max", 9),
    ("share", 8),
    ("errors", 8),
    ("gpu p50", 9),
    ("gpu p99", 9),
)


def render_table(rows: list[list[str]], widths: list[int]) -> list[str]:
    """Rows of cells as lines: the first column left-aligned, the others right-aligned and apart."""
    widths = [
        max([w] + [len(r[i]) + (1 if i else 0) for r in rows if i < len(r)])
        for i, w in enumerate(widths)
    ]
    return [
        "".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r))
        for r in rows
    ]


def print_budget(report: dict, out) -> None:
    """A table: one line per stage, then unattributed and end to end (columns stay apart at any duration)."""
    cfg = report["config"]
    threads = f"  threads={cfg['threads']}" if cfg.get("threads") is not None else ""
    print(
        f"{report['pipeline']}  device={cfg.get('device')}  batch_size={cfg.get('batch_size')}  "
        f"precision={cfg.get('precision')}{threads}  ({report['end_to_end']['count']} requests, ms)",
        file=out,
    )
    # the trust lines: the noise flag, and what int8 quantized
    print(noise_line(report.get("noise") or {"noisy": None, "reasons": ["not recorded"]}), file=out)
    if report.get("quantization"):
        print(f"int8: {report['quantization']['text']}", file=out)
    device = any("device" in s for s in report["stages"])
    columns = BUDGET_COLUMNS if device else BUDGET_COLUMNS[:9]
    rows = [[name for name, _ in columns]]
    for s in report["stages"]:
        row = [*_cells(s["name"], s), _share(s["share"]), str(report["errors"][s["name"]])]
        if device:
            row += [_fmt(s["device"]["p50_ms"]), _fmt(s["device"]["p99_ms"])]
        rows.append(row)
    e2e_mean = report["end_to_end"]["mean_ms"]
    for label, key in (("(unattributed)", "unattributed"), ("end to end", "end_to_end")):
        e = report[key]
        share = ""
        if key == "unattributed" and _known(e["mean_ms"]) and _known(e2e_mean) and e2e_mean:
            share = _share(e["mean_ms"] / e2e_mean)
        rows.append([*_cells(label, e), share])
    for line in render_table(rows, [w for _, w in columns]):
        print(line, file=out)
    e2e = report["end_to_end"]
    lo, hi = e2e.get("p99_ci_low_ms"), e2e.get("p99_ci_high_ms")
    few = f": {e2e.get('count')} successful requests; {requests_to_bound(99)} bound it"
    if lo is not None and hi is not None:
        print(f"p99 end to end 95% CI: [{lo:.3f}, {hi:.3f}] ms", file=out)
    elif lo is not None or e2e.get("count"):
        bounds = "unbounded" if lo is None else f"[{lo:.3f}, unbounded] ms"
        print(f"p99 end to end 95% CI: {bounds}{few}", file=out)
    if far_tail_text(e2e):
        print(f"end to end {far_tail_text(e2e)}", file=out)
    if report.get("throughput_items_per_s") is not None:
        print(
            f"throughput: {report['throughput_items_per_s']:.1f} items/s "
            "(batch_size x successful requests / their summed end to end)",
            file=out,
        )
    if report.get("tokens"):
        for line in token_text(report["tokens"]):
            print(line, file=out)
    print_warmup(report.get("warmup") or {}, out)
    print_failures(report, out)
    print_explain(report, out)


def print_explain(report: dict, out) -> None:
    """Why the tail is what it is: tail attribution, the strongest attribute, GC pauses, cold start."""
    tail = report.get("tail") or {}
    if tail.get("headline"):
        print(f"tail: {tail['headline']}", file=out)
    for note in tail.get("notes") or []:
        print(f"tail: {note}", file=out)
    stacks = (report.get("stacks") or {}).get("headline")
    if stacks:
        print(f"tail: {stacks} (sampled stacks of every timed request)", file=out)
    waits = (report.get("waits") or {}).get("headline")
    if waits:
        print(f"waits: {waits} (every thread sampled)", file=out)
    if report.get("waits_note"):
        print(f"waits: {report['waits_note']}", file=out)
    attrs = report.get("attributes_summary") or {}
    if attrs.get("headline"):
        print(f"attributes: {attrs['headline']}", file=out)
    hol = report.get("head_of_line") or {}
    if hol.get("stage") and hol["queue_wait_ns"]:
        stage = hol["stage"]
        batches = ", ".join(str(h["batch"]) for h in hol["holders"] if h["stage"] == stage)
        print(
            f"blocking: {stage} of other batches held the executor for {hol['share_of_queue_wait'][stage]:.0%} of "
            f"the queue wait ({hol['share_of_wait'][stage]:.0%} of all batch and queue wait); most in batches "
            f"{batches}",
            file=out,
        )
    gc = report.get("gc")
    if gc and gc["pause_ms_total"] > 0:
        print(
            f"gc: {gc['pause_ms_total']:.3f} ms of collection pauses in {gc['requests_with_gc']} of "
            f"{gc['requests']} requests, most in {gc['stage']}; {gc['share_slowest_5pct']:.0%} of the slowest "
            "5 %'s time",
            file=out,
        )
    cold = report.get("cold_start") or {}
    build_ms, first_ms = cold.get("build_ms"), cold.get("first_request_ms")
    if build_ms is not None or first_ms is not None:
        build = "build not timed" if build_ms is None else f"build {build_ms:.1f} ms"
        first = "no first request" if first_ms is None else f"first request {first_ms:.3f} ms"
        print(f"cold start (not in the budget): {build} (factory, model load), {first}", file=out)


def print_warmup(w: dict, out) -> None:
    """The warm-up line: figures of the successful warm-up requests; failed ones are counted, not timed."""
    if not w.get("count"):
        return
    failed = w.get("failed") or 0
    fails = f", {failed} failed (failures, not latencies)" if failed else ""
    if w.get("mean_ms") is None:
        print(f"warm-up: {w['count']} requests{fails}", file=out)
        return
    first = f"first {w['first_ms']:.3f} ms, " if w.get("first_ms") is not None else "first failed, "
    print(
        f"warm-up: {w['count']} requests{fails}, {first}mean {w['mean_ms']:.3f} ms (not in percentiles)",
        file=out,
    )


def print_failures(report: dict, out) -> None:
    """The failures section: per stage count and share, each distinct failure with its count and where."""
    sections = [
        ("failures (measured requests)", report.get("failures")),
        ("failures (warm-up)", report.get("warmup_failures")),
        ("failures (traced run)", records_summary(report.get("traced_failures") or [])),
    ]
    print_failure_sections(sections, out)


def print_failure_sections(sections: list[tuple[str, dict | None]], out, indent: str = "") -> None:
    """``title:`` then its failure lines, for each section with a failure."""
    for title, summary in sections:
        if summary:
            print(f"{indent}{title}:", file=out)
            print_failure_lines(summary, out, indent=indent + "  ")


def print_failure_lines(summary: dict, out, indent: str = "  ") -> None:
    """One line per stage, then one per distinct failure: count, type, message, where."""
    for stage, entry in summary.items():
        share = f" ({entry['share'] * 100:.1f} %)" if entry.get("share") is not None else ""
        print(f"{indent}{stage}: {entry['count']} failed{share}", file=out)
        for m in entry["messages"]:
            where = f"  at {m['where']}" if m.get("where") else ""
            print(f"{indent}  {m['count']} x {m['type']}: {m['message']}{where}", file=out)


def _share(x) -> str:
    return f"{x * 100:.1f}%" if _known(x) else "-"


# -- sweep folders (load --sweep): the table as measured and shown, two sweeps compared --------------

TABLE_COLUMNS = (
    ("rate_rps", "rate", 8, ".4g"),
    ("concurrency", "conc", 5, ""),
    ("offered_rps", "offered", 8, ".1f"),
    ("achieved_rps", "achieved", 8, ".1f"),
    ("p50_ms", "p50 ms", 8, ".3f"),
    ("p95_ms", "p95 ms", 8, ".3f"),
    ("p99_ms", "p99 ms", 8, ".3f"),
    ("failed", "failed", 6, ""),
    ("generator_lag_p99_ms", "lag p99", 8, ".3f"),
)


def table_header() -> str:
    return " ".join(f"{label:>{width}}" for _, label, width, _ in TABLE_COLUMNS) + "  stability"


def table_row(p: dict) -> str:
    cells = [_cell(p.get(key), width, spec) for key, _, width, spec in TABLE_COLUMNS]
    stable = f"UNSTABLE ({p['windows']} windows)"
    if p["stable"]:
        ran = f" ({p['windows']} run)" if p["windows"] != p["stable_after_windows"] else ""
        stable = f"stable after {p['stable_after_windows']} windows{ran}"
    pred = p.get("predicted") or {}
    ratios = pred.get("p50_ratio"), pred.get("p99_ratio")
    extra = f"  sim p50 x{ratios[0]:.2f} p99 x{ratios[1]:.2f}" if None not in ratios else ""
    late = behind_schedule(p.get("generator_lag_p99_ms"))  # its generator sent another load
    marks = (" BEHIND SCHEDULE" if late else "") + (" NOISY" if p.get("noisy") else "")
    return " ".join(cells) + "  " + stable + marks + extra


def footer(record: dict) -> str:
    sla = record["plan"]["sla_ms"]
    knee = record.get("knee")
    lines = [f"stopped: {record['stopped']}"]
    if sla is None:
        lines.append("knee: give --sla-ms to find it")
    elif knee is None:
        lines.append(f"knee: no stable point has p99 <= {sla:g} ms")
    else:
        lines.append(
            f"knee: {knee['offered_rps']:.1f} req/s offered ({knee['achieved_rps']:.1f} achieved), "
            f"p99 {knee['p99_ms']:.3f} ms <= SLA {sla:g} ms (point {knee['point']})"
        )
    pred = record.get("prediction")
    if pred:
        source = pred["source"] if pred.get("source") else f"none ({pred['why']})"
        lines.append(f"simulator: {source}")
    return "\n".join(lines)


def print_sweep(record: dict, out=sys.stdout) -> None:
    """The sweep table of ``workbench show SWEEP_DIR``."""
    print(
        f"sweep of {record['pipeline']} ({record['kind']}): {record['plan']['parameter']}, "
        f"up to {record['plan']['max_windows']} windows of {record['plan']['window_s']:g} s per point",
        file=out,
    )
    print(table_header(), file=out)
    for p in record["points"]:
        print(table_row(p), file=out)
    print(footer(record), file=out)


def compare_sweeps_command(paths: list[Path], as_json: bool) -> int:
    """``workbench compare SWEEP_A SWEEP_B``: per-point ratios B/A at the values both measured."""
    a, b = (read_sweep(p) for p in paths)
    table = compare_sweeps(a, b)
    if table.empty:
        raise ConfigError(f"{paths[0]} and {paths[1]} have no swept value in common")
    records = strict(table.to_dict("records"))  # a ratio left undefined: null, not NaN
    if as_json:
        knees = {"a": a.get("knee"), "b": b.get("knee")}
        print(dumps({"a": str(paths[0]), "b": str(paths[1]), "points": records, "knee": knees}))
        return 0
    print(f"A = {paths[0]}\nB = {paths[1]}")
    print(
        f"{'value':>8} {'A p50':>8} {'B p50':>8} {'x':>6} {'A p99':>8} {'B p99':>8} {'x':>6} "
        f"{'A rps':>8} {'B rps':>8} {'x':>6}  stable A/B"
    )
    for r in records:
        cells = [f"{r['value']:>8.4g}"]
        for name, unit in (("p50", "ms"), ("p99", "ms"), ("achieved", "rps")):
            cells += [_cell(r[f"{side}_{name}_{unit}"], 8, ".3f") for side in "ab"]
            cells.append(_cell(r[f"{name}_ratio"], 6, ".2f"))
        stable = "/".join("yes" if r[f"{x}_stable"] else "NO" for x in "ab")
        print(" ".join(cells) + f"  {stable}")
    for label, rec in (("A", a), ("B", b)):
        knee = rec.get("knee")
        at = f"{knee['offered_rps']:.1f} req/s, p99 {knee['p99_ms']:.3f} ms" if knee else "none"
        print(f"knee {label}: {at}")
    return 0


def _cell(value, width: int, spec: str) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"
