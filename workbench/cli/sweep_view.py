"""Sweep folders shown for ``show``, ``compare``, ``audit`` (:mod:`workbench.cli.sweep` measures;
``batching.capacity.decode_sweep`` reads ``sweep.json``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ..batching.summary import behind_schedule
from ..errors import ConfigError
from .output import dumps, strict
from ..batching.capacity import compare_sweeps, is_sweep, read_sweep
from ..plots.batching import sweep_record_figure

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


def write_figure(record: dict, path: Path) -> Path:
    """The sweep's figure as a standalone HTML page (plotly.js inlined: it opens offline)."""
    if importlib.util.find_spec("plotly") is None:
        raise ConfigError("--figure needs plotly: pip install 'plotly>=5.20'")
    fig = sweep_record_figure(
        record, title=f"{record['pipeline']} ({record['kind']}): latency vs throughput"
    )
    tmp = path.with_name(f".{path.name}.tmp")
    fig.write_html(tmp, include_plotlyjs=True)
    tmp.replace(path)
    return path


def expand_sweeps(paths: list[Path]) -> list[Path]:
    """Run folders with each sweep folder replaced by its point runs, in sweep order (``audit SWEEP_DIR``)."""
    out = []
    for path in paths:
        points = read_sweep(path)["points"] if is_sweep(path) else None
        out += [path] if points is None else [Path(path) / p["run"] for p in points]
    return out
