"""Reading sweep folders for ``show``, ``compare``, ``audit``: the table, the ratios, the point runs, the figure.

Nothing here measures (that is :mod:`workbench.cli.sweep`), so the commands that
only read a sweep import this module and none of the measuring ones.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import ConfigError

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
    cells = [
        f"{'-':>{width}}" if p.get(key) is None else f"{p[key]:>{width}{spec}}"
        for key, _, width, spec in TABLE_COLUMNS
    ]
    stable = (
        f"stable after {p['stable_after_windows']} windows"
        + (f" ({p['windows']} run)" if p["windows"] != p["stable_after_windows"] else "")
        if p["stable"]
        else f"UNSTABLE ({p['windows']} windows)"
    )
    pred = p.get("predicted")
    extra = (
        f"  sim p50 x{pred['p50_ratio']:.2f} p99 x{pred['p99_ratio']:.2f}"
        if pred and pred.get("p50_ratio") is not None and pred.get("p99_ratio") is not None
        else ""
    )
    return " ".join(cells) + "  " + stable + (" NOISY" if p.get("noisy") else "") + extra


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
        lines.append(
            f"simulator: {pred['source']}"
            if pred.get("source")
            else f"simulator: none ({pred['why']})"
        )
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


def is_sweep(path: Path) -> bool:
    """Whether ``path`` is a sweep folder (it holds ``sweep.json``) rather than a run folder."""
    from ..batching.capacity import is_sweep as holds_sweep

    return holds_sweep(path)


def show_sweep(path: Path, as_json: bool) -> int:
    """``workbench show SWEEP_DIR``: the sweep's table (or its record as JSON)."""
    from ..batching.capacity import load_sweep

    record = load_sweep(path)
    if as_json:
        print(json.dumps(record))
    else:
        print_sweep(record)
    return 0


def compare_sweeps_command(paths: list[Path], as_json: bool) -> int:
    """``workbench compare SWEEP_A SWEEP_B``: per-point ratios B/A at the values both measured."""
    from ..batching.capacity import compare_sweeps, load_sweep

    a, b = (load_sweep(p) for p in paths)
    table = compare_sweeps(a, b)
    if table.empty:
        raise ConfigError(f"{paths[0]} and {paths[1]} have no swept value in common")
    if as_json:
        print(
            json.dumps(
                {
                    "a": str(paths[0]),
                    "b": str(paths[1]),
                    "points": table.to_dict("records"),
                    "knee": {"a": a.get("knee"), "b": b.get("knee")},
                }
            )
        )
        return 0
    print(f"A = {paths[0]}\nB = {paths[1]}")
    print(
        f"{'value':>8} {'A p50':>8} {'B p50':>8} {'x':>6} {'A p99':>8} {'B p99':>8} {'x':>6} "
        f"{'A rps':>8} {'B rps':>8} {'x':>6}  stable A/B"
    )
    for r in table.to_dict("records"):
        cells = [f"{r['value']:>8.4g}"]
        for name in ("p50", "p99", "achieved"):
            unit = "rps" if name == "achieved" else "ms"
            cells += [
                _cell(r[f"a_{name}_{unit}"], 8, ".3f"),
                _cell(r[f"b_{name}_{unit}"], 8, ".3f"),
                _cell(r[f"{name}_ratio"], 6, ".2f"),
            ]
        print(
            " ".join(cells)
            + f"  {'yes' if r['a_stable'] else 'NO'}/{'yes' if r['b_stable'] else 'NO'}"
        )
    for label, rec in (("A", a), ("B", b)):
        knee = rec.get("knee")
        print(
            f"knee {label}: "
            + (f"{knee['offered_rps']:.1f} req/s, p99 {knee['p99_ms']:.3f} ms" if knee else "none")
        )
    return 0


def _cell(value, width: int, spec: str) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"


def write_figure(record: dict, path: Path) -> Path:
    """The sweep's figure as a standalone HTML page (plotly.js inlined: it opens offline)."""
    import importlib.util

    if importlib.util.find_spec("plotly") is None:
        raise ConfigError("--figure needs plotly: pip install 'plotly>=5.20'")
    from ..plots.sweep import sweep_record_figure

    fig = sweep_record_figure(
        record, title=f"{record['pipeline']} ({record['kind']}): latency vs throughput"
    )
    tmp = path.with_name(f".{path.name}.tmp")
    fig.write_html(tmp, include_plotlyjs=True)
    tmp.replace(path)
    return path


def expand_sweeps(paths: list[Path]) -> list[Path]:
    """Run folders with each sweep folder replaced by its point runs, in sweep order (``audit SWEEP_DIR``)."""
    from ..batching.capacity import load_sweep

    out = []
    for path in paths:
        out += (
            [Path(path) / p["run"] for p in load_sweep(path)["points"]]
            if is_sweep(path)
            else [path]
        )
    return out
