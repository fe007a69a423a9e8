"""Reading sweep folders for ``show``, ``compare``, ``audit`` (:mod:`workbench.cli.sweep` measures).

A ``sweep.json`` is decoded once, here, into :class:`SweepFile` (the schema of docs/json.md): a
value that does not fit is exit 2 with one line naming the file, the field and the value.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, Union

import msgspec

from ..batching.loadgen import behind_schedule
from ..errors import ConfigError
from ..files import read_capped
from .output import dumps, strict
from ..batching.capacity import FORMAT, SWEEP_FILE, VERSION, compare_sweeps, is_sweep
from ..plots.batching import sweep_record_figure

# -- the sweep file, decoded at the boundary -------------------------------------------------------------------

NonNeg = Annotated[float, msgspec.Meta(ge=0)]
Positive = Annotated[float, msgspec.Meta(gt=0)]
Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]  # int64, as the tables hold them
AtLeastOne = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]
MAX_SWEEP_FILE_BYTES = 512 * 2**20


class Percentiles(msgspec.Struct):
    p50_ms: NonNeg | None = None
    p95_ms: NonNeg | None = None
    p99_ms: NonNeg | None = None


class WindowRow(msgspec.Struct):
    window: Count
    start_ns: Count
    end_ns: Count
    requests: Count
    ok: Count
    failed: Count
    offered_rps: NonNeg | None = None
    achieved_rps: NonNeg | None = None
    p50_ms: NonNeg | None = None
    p95_ms: NonNeg | None = None
    p99_ms: NonNeg | None = None


class Predicted(msgspec.Struct):
    p50_ms: NonNeg | None = None
    p99_ms: NonNeg | None = None
    stable: bool | None = None
    capacity_rps: NonNeg | None = None
    p50_ratio: NonNeg | None = None
    p99_ratio: NonNeg | None = None


class Point(msgspec.Struct, kw_only=True):
    point: Count
    run: str
    rate_rps: Positive | None = None
    concurrency: AtLeastOne | None = None
    offered_rps: NonNeg
    achieved_rps: NonNeg
    requests: Count
    failed: Count
    failures: dict[str, Count] = {}
    p50_ms: NonNeg | None = None
    p95_ms: NonNeg | None = None
    p99_ms: NonNeg | None = None
    stages: dict[str, Percentiles] = {}
    generator_lag_p99_ms: float | None = None
    generator_lag_max_ms: float | None = None
    noisy: bool | None = None
    stable: bool
    stable_after_windows: Count | None = None
    windows_used: list[Count] = []
    windows: Count
    stopped_by: Literal["stable", "max-windows"] | None = None
    window_table: list[WindowRow] = []
    predicted: Predicted | None = None


class Policy(msgspec.Struct):
    max_batch_size: AtLeastOne
    max_wait_ms: NonNeg
    concurrency: AtLeastOne


class Plan(msgspec.Struct):
    parameter: Literal["rate", "concurrency"]
    values: Union[list[Positive], Literal["auto"], None]
    window_s: Positive
    max_windows: AtLeastOne
    stability_pct: Positive
    sla_ms: Positive | None = None
    start_rate_rps: Positive | None = None
    max_points: AtLeastOne = 12


class Knee(msgspec.Struct):
    point: Count
    offered_rps: NonNeg
    achieved_rps: NonNeg
    p99_ms: NonNeg


class Prediction(msgspec.Struct, omit_defaults=True):
    source: str | None
    why: str | None = None


class SweepFile(msgspec.Struct, kw_only=True):
    format: str
    version: int
    kind: Literal["load", "served"]
    pipeline: str | None = None
    url: str | None = None
    policy: Policy | None = None
    created: str | None = None
    plan: Plan
    points: list[Point]
    stopped: str | None = None
    knee: Knee | None = None
    prediction: Prediction | None = None
    sweep_dir: str | None = None  # a saved ``load --sweep --json`` output


def decode_sweep(path: str | Path) -> SweepFile:
    """``path/sweep.json`` as a :class:`SweepFile`; ConfigError (exit 2, one line) naming file, field and value."""
    folder = Path(path)
    file = folder / SWEEP_FILE
    if not file.exists():
        raise ConfigError(f"{path}: not a sweep folder (no {SWEEP_FILE})")
    if file.is_symlink() and not file.resolve().is_relative_to(folder.resolve()):
        raise ConfigError(
            f"{file}: a symbolic link out of the sweep folder (to {file.resolve()}); refused"
        )
    raw = read_capped(file, MAX_SWEEP_FILE_BYTES, ConfigError, "sweep file")
    try:
        record = msgspec.json.decode(raw, type=SweepFile)
    except msgspec.ValidationError as exc:
        raise ConfigError(_validation_line(file, raw, str(exc))) from None
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: not valid JSON ({str(exc)[:120]})") from None
    if record.format != FORMAT or record.version != VERSION:
        raise ConfigError(
            f"{file}: field 'format'/'version' must be {FORMAT!r}/{VERSION}, got "
            f"{_shown(record.format)}/{_shown(record.version)}"
        )
    swept = "rate_rps" if record.plan.parameter == "rate" else "concurrency"
    for i, p in enumerate(record.points):
        run = PurePosixPath(p.run)
        if not p.run or run.is_absolute() or ".." in run.parts or "\\" in p.run:
            raise ConfigError(
                f"{file}: field points[{i}].run must be a folder inside the sweep folder, "
                f"got {_shown(p.run)}"
            )
        if getattr(p, swept) is None:
            raise ConfigError(
                f"{file}: field points[{i}].{swept} is null in a {record.plan.parameter} sweep"
            )
    prediction = record.prediction
    if prediction is not None and prediction.source is None and prediction.why is None:
        raise ConfigError(
            f"{file}: field prediction.why is missing where prediction.source is null"
        )
    return record


def read_sweep(path: str | Path) -> dict[str, Any]:
    """The decoded sweep as plain data (the shape ``batching.capacity`` and the plots read): no
    ``sweep_dir`` key where it is null, nor ``predicted`` in a point without one."""
    record = msgspec.to_builtins(decode_sweep(path))
    if record.get("sweep_dir") is None:
        record.pop("sweep_dir", None)
    for point in record["points"]:
        if point["predicted"] is None:
            del point["predicted"]
    return record


_FIELD = re.compile(r" - at `\$(.*)`$")
_STEP = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]|\[\.\.\.\]")


def _validation_line(file: Path, raw: bytes, message: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.points[0].requests`" as "FILE: field points[0].requests:
    expected `int`, got `str` (value 'x')"; a value in a mapping (msgspec's ``[...]``) is named by its key."""
    m = _FIELD.search(message)
    what = message[: m.start()] if m else message
    value, where = _value_at(raw, m.group(1) if m else "")
    shown = "" if value is _MISSING else f" (value {_shown(value)})"
    field = f"field {where.lstrip('.')}" if where else "the document"
    return f"{file}: {field}: {what[:1].lower()}{what[1:]}{shown}"


_MISSING = object()
_MAPPING_VALUES = {"stages": Percentiles, "failures": Count}  # the {str: ...} fields, their values


def _value_at(raw: bytes, path: str) -> tuple[Any, str]:
    """The value at msgspec's error ``path`` and the path with each ``[...]`` replaced by the failing key."""
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return _MISSING, path
    resolved, last_key = "", ""
    for step in _STEP.finditer(path):
        key, index = step.groups()
        try:
            if key:
                value, last_key, resolved = value[key], key, f"{resolved}.{key}"
            elif index:
                value, resolved = value[int(index)], f"{resolved}[{index}]"
            else:  # a mapping's value: the first one that does not decode is the one msgspec stopped at
                bad = _failing_key(value, _MAPPING_VALUES.get(last_key))
                if bad is None:
                    return _MISSING, resolved + path[step.start() :]
                value, resolved = value[bad], f"{resolved}[{bad!r}]"
        except (KeyError, IndexError, TypeError, ValueError):
            return _MISSING, resolved + path[step.start() :]
    return value, resolved


def _failing_key(mapping: Any, kind: Any) -> str | None:
    if kind is None or not isinstance(mapping, dict):
        return None
    for k, v in mapping.items():
        try:
            msgspec.convert(v, type=kind)
        except msgspec.ValidationError:
            return k
    return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
