"""Capacity sweeps: a load run per arrival rate (or executor count), measured in windows, and the knee.

A sweep folder holds a run folder per point (``point-00-rate-50``, ...) and ``sweep.json`` (format
``workbench.sweep``, docs/json.md, with the windows' rule), rewritten atomically after every
point. ``rate=auto`` doubles the rate until p99 passes ``sla_ms`` or the achieved rate stops
growing. The caller measures
(``measure(value, folder, watch) -> Run``), so this module has no sockets or pipelines.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, Union

import msgspec
import numpy as np
import pandas as pd

from ..analysis.stats import summarize_ns
from ..analysis.windows import StabilityWatch, auto_stop, counted_windows, knee, ratio, window_table
from ..errors import ConfigError, value_at
from ..files import read_capped
from ..record.folder import write_text_atomically
from ..trace.numbers import strict
from ..units import NS_PER_S

FORMAT = "workbench.sweep"
VERSION = 1
SWEEP_FILE = "sweep.json"
PARAMETERS = ("rate", "concurrency")
PERCENTILES = ("p50_ms", "p95_ms", "p99_ms")  # of end to end and of each stage, per point
SWEPT = {"rate": "rate_rps", "concurrency": "concurrency"}  # a point's field of each parameter
KNEE = ("point", "offered_rps", "achieved_rps", "p99_ms")  # what sweep.json keeps of the knee point


@dataclass(frozen=True)
class SweepPlan:
    """What to sweep (``parameter`` "rate", req/s, or "concurrency", executors) at which ``values``
    (None: ``rate=auto``), and how long to measure each point."""

    parameter: str
    values: tuple[float, ...] | None
    window_s: float = 5.0
    max_windows: int = 10
    stability_pct: float = 10.0
    sla_ms: float | None = None
    start_rate_rps: float = 50.0
    max_points: int = 12

    def __post_init__(self) -> None:  # parse_sweep and load's option types checked the rest
        if self.values is None and (self.parameter != "rate" or self.sla_ms is None):
            raise ConfigError(
                "--sweep rate=auto needs --sla-ms (it doubles the rate until p99 passes it)"
            )

    @property
    def duration_s(self) -> float:
        """Seconds of arrivals of one point at most: ``max_windows`` windows."""
        return self.window_s * self.max_windows

    @property
    def window_ns(self) -> int:
        return int(round(self.window_s * NS_PER_S))

    def watch(self) -> StabilityWatch:
        """A fresh stop rule for one point's generator."""
        return StabilityWatch(self.window_ns, self.stability_pct, self.max_windows)

    def params(self) -> dict[str, Any]:
        return asdict(self) | {
            "values": list(self.values) if self.values is not None else "auto",
            "start_rate_rps": self.start_rate_rps if self.values is None else None,
        }


def parse_sweep(text: str) -> tuple[str, tuple[float, ...] | None]:
    """``"rate=50,100"`` -> ``("rate", (50.0, 100.0))``; ``"rate=auto"`` -> ``("rate", None)``."""
    name, sep, spec = text.partition("=")
    if not sep or name not in PARAMETERS or not spec:
        raise ConfigError(
            f"--sweep {text!r}: expected rate=50,100,200, rate=auto or concurrency=1,2,4"
        )
    if spec == "auto":
        if name != "rate":
            raise ConfigError(f"--sweep {text!r}: only the rate sweeps automatically (rate=auto)")
        return name, None
    try:
        values = tuple(float(v) for v in spec.split(","))
    except ValueError:
        raise ConfigError(
            f"--sweep {text!r}: {spec!r} is not a comma-separated list of numbers"
        ) from None
    if any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ConfigError(f"--sweep {text!r}: every value must be > 0")
    if name == "concurrency" and any(v != int(v) for v in values):
        raise ConfigError(f"--sweep {text!r}: concurrency values are whole numbers")
    if list(values) != sorted(set(values)):
        raise ConfigError(f"--sweep {text!r}: give the values once each, in increasing order")
    return name, values


def _get(section: Any, key: str) -> Any:
    """A field of a run-record section, a mapping or a typed record (None: missing)."""
    if isinstance(section, dict):
        return section.get(key)
    return getattr(section, key, None)


def point_row(
    run, plan: SweepPlan, value: float, index: int, folder: str, watch: StabilityWatch | None = None
) -> dict[str, Any]:
    """One point of ``sweep.json`` from its run: windows, stability, rates, percentiles, stages,
    lag, noise; ``watch`` says how many windows ran (all ``max_windows`` when it did not stop)."""
    window_ns = plan.window_ns
    early = watch is not None and watch.windows_run is not None
    req = run.requests
    columns = (req[c].to_numpy() for c in ("start_ns", "dur_ns", "ok"))
    windows = window_table(*columns, window_ns, watch.windows_run if early else plan.max_windows)
    used, stable = counted_windows(windows, plan.stability_pct)
    lo, hi = used[0] * window_ns, (used[-1] + 1) * window_ns
    inside = req[(req["start_ns"] >= lo) & (req["start_ns"] < hi)]
    good = inside[inside["ok"]]
    end = req["start_ns"] + req["dur_ns"]
    seconds = (hi - lo) / NS_PER_S
    e2e = summarize_ns(good["dur_ns"].to_numpy(dtype=np.int64))
    load, meta = _get(run.meta, "load"), run.meta
    policy = _get(load, "policy") or {}
    return {
        "point": index,
        "run": folder,
        "rate_rps": value if plan.parameter == "rate" else _get(_get(load, "arrivals"), "rate_rps"),
        "concurrency": int(value)
        if plan.parameter == "concurrency"
        else _get(policy, "concurrency"),
        "offered_rps": len(inside) / seconds,
        "achieved_rps": int((req["ok"] & (end >= lo) & (end < hi)).sum()) / seconds,
        "requests": int(len(inside)),
        "failed": int((~inside["ok"]).sum()),
        "failures": {
            str(k): int(v)
            for k, v in inside.loc[~inside["ok"], "error_stage"].value_counts().items()
        },
        **{k: e2e[k] for k in PERCENTILES},
        "stages": _stage_percentiles(run.stages, good["request"], run.stage_names),
        "generator_lag_p99_ms": _get(load, "generator_lag_p99_ms"),
        "generator_lag_max_ms": _get(load, "generator_lag_ms"),
        "noisy": _get(_get(meta, "noise"), "noisy"),
        "stable": stable,
        "stable_after_windows": used[-1] + 1 if stable else None,
        "windows_used": used,
        "windows": len(windows),
        "stopped_by": "stable" if early else "max-windows",
        "window_table": strict(windows.to_dict("records")),
    }


def _stage_percentiles(
    stages: pd.DataFrame, requests: pd.Series, names: list[str]
) -> dict[str, dict]:
    """p50/p95/p99 (ms) of each stage over the given requests, in stage order."""
    st = stages[stages["request"].isin(requests)]
    out = {}
    for name in names:
        s = summarize_ns(st.loc[st["stage"] == name, "dur_ns"].to_numpy(dtype=np.int64))
        if s["count"]:
            out[name] = {k: s[k] for k in PERCENTILES}
    return out


def run_sweep(
    plan: SweepPlan,
    measure: Callable[[float, Path], Any],
    out: Path,
    header: dict[str, Any],
    on_point: Callable[[dict], None] | None = None,
) -> dict[str, Any]:
    """Measure every point into ``out`` and return the sweep record (also ``out/sweep.json``);
    ``header``'s ``policy`` None: the first run's."""
    if out.exists():
        raise ConfigError(f"--out {out} already exists; pick another folder")
    out.mkdir(parents=True)
    record = {
        "format": FORMAT,
        "version": VERSION,
        **header,
        "plan": plan.params(),
        "points": [],
        "stopped": None,
        "knee": None,
        "prediction": None,
    }
    doubling = [plan.start_rate_rps * 2**k for k in range(plan.max_points)]  # rate=auto
    for index, value in enumerate(plan.values if plan.values is not None else doubling):
        folder = f"point-{index:02d}-{plan.parameter}-{value:g}"
        watch = plan.watch()
        run = measure(value, out / folder, watch)
        record["points"].append(point_row(run, plan, value, index, folder, watch))
        # a server reports its own policy and names its pipeline
        record["policy"] = record.get("policy") or _get(_get(run.meta, "load"), "policy")
        record["pipeline"] = record.get("pipeline") or _get(run.meta, "pipeline")
        if on_point is not None:
            on_point(record["points"][-1])
        if plan.values is not None:  # why the sweep ends after this point (None: it goes on)
            record["stopped"] = "list done" if index == len(plan.values) - 1 else None
        else:
            record["stopped"] = auto_stop(pd.DataFrame(record["points"]), plan.sla_ms)
            if record["stopped"] is None and index == plan.max_points - 1:
                record["stopped"] = f"--max-points {plan.max_points} reached"
        k = knee(pd.DataFrame(record["points"]), plan.sla_ms)
        record["knee"] = None if k is None else {key: record["points"][k][key] for key in KNEE}
        write_sweep(out, record)
        if record["stopped"] != "list done" and record["stopped"] is not None:
            break
    return record


def add_prediction(record: dict[str, Any], predicted: pd.DataFrame, source: str) -> dict[str, Any]:
    """The record with each point's simulated p50/p99 (``predicted``: :func:`~.sweeps.sweep` rows in
    point order) and the measured/predicted ratios."""
    points = []
    for row, (_, sim) in zip(record["points"], predicted.iterrows()):
        kinds = {"p50_ms": float, "p99_ms": float, "stable": bool, "capacity_rps": float}
        pred = {k: kind(sim[k]) for k, kind in kinds.items()}
        for q in ("p50", "p99"):
            pred[f"{q}_ratio"] = ratio(row[f"{q}_ms"], pred[f"{q}_ms"])
        points.append(row | {"predicted": strict(pred)})
    return record | {"points": points, "prediction": {"source": source}}


def write_sweep(out: Path, record: dict[str, Any]) -> Path:
    """``out/sweep.json``, strict JSON, written beside and renamed (a reader never sees half of it)."""
    write_text_atomically(
        out / SWEEP_FILE, json.dumps(strict(record), indent=1, allow_nan=False) + "\n"
    )
    return out / SWEEP_FILE


def is_sweep(path: str | os.PathLike) -> bool:
    return (Path(path) / SWEEP_FILE).is_file()


# -- the sweep file, decoded at the boundary (docs/json.md): a value that does not fit is exit 2 with one line
# naming the file, the field and the value

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


NESTED = ("failures", "stages", "windows_used", "window_table", "predicted")  # not columns
POINT_COLUMNS = [f for f in Point.__struct_fields__ if f not in NESTED]


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
    swept = SWEPT[record.plan.parameter]
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


def _validation_line(file: Path, raw: bytes, message: str) -> str:
    """msgspec's error as "FILE: field points[0].rate: expected `int`, got `str` (value 'x')"."""
    m = _FIELD.search(message)
    what = message[: m.start()] if m else message
    value, where = _value_at(raw, m.group(1) if m else "")
    shown = "" if value is _MISSING else f" (value {_shown(value)})"
    field = f"field {where.lstrip('.')}" if where else "the document"
    return f"{file}: {field}: {what[:1].lower()}{what[1:]}{shown}"


_MISSING = object()
_MAPPING_VALUES = {"stages": Percentiles, "failures": Count}  # the {str: ...} fields, their values


def _value_at(raw: bytes, path: str) -> tuple[Any, str]:
    """The value at msgspec's error ``path``, and the path with ``[...]`` named by the failing key."""
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return _MISSING, path
    head, mapping, tail = path.partition("[...]")
    value = value_at(data, head, _MISSING)
    if mapping and value is not _MISSING:
        bad = _failing_key(value, _MAPPING_VALUES.get(head.rsplit(".", 1)[-1]))
        if bad is None:
            return _MISSING, path
        head, value = f"{head}[{bad!r}]", value_at(value[bad], tail, _MISSING)
    return value, head + tail


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


def points_table(record: dict[str, Any]) -> pd.DataFrame:
    """One row per point: :data:`POINT_COLUMNS` and the ``predicted_*`` figures when present."""
    predicted = ("p50_ms", "p99_ms", "p50_ratio", "p99_ratio", "stable", "capacity_rps")
    rows = [
        {k: p.get(k) for k in POINT_COLUMNS}
        | {f"predicted_{k}": (p.get("predicted") or {}).get(k) for k in predicted}
        for p in record["points"]
    ]
    return pd.DataFrame(rows, columns=[*POINT_COLUMNS, *(f"predicted_{k}" for k in predicted)])


def compare_sweeps(a: dict[str, Any], b: dict[str, Any]) -> pd.DataFrame:
    """Per value both sweeps measured: ``value``, ``a_``/``b_`` p50_ms, p99_ms, achieved_rps and
    stable, and ``p50_ratio``, ``p99_ratio``, ``achieved_ratio`` (B over A; None where A's is 0)."""
    if a["plan"]["parameter"] != b["plan"]["parameter"]:
        raise ConfigError(
            f"the sweeps vary different things ({a['plan']['parameter']} and "
            f"{b['plan']['parameter']}); compare sweeps of one parameter"
        )
    column = SWEPT[a["plan"]["parameter"]]
    theirs = {p[column]: p for p in b["points"]}
    rows = []
    for p in a["points"]:
        q = theirs.get(p[column])
        if q is None:
            continue
        row = {"value": p[column]}
        for name in ("p50_ms", "p99_ms", "achieved_rps", "stable"):
            row[f"a_{name}"], row[f"b_{name}"] = p[name], q[name]
        for name in ("p50_ms", "p99_ms", "achieved_rps"):
            row[f"{name.split('_')[0]}_ratio"] = ratio(q[name], p[name])
        rows.append(row)
    return pd.DataFrame(rows)


def sweep_service_runs(path: str | os.PathLike | None, record: dict[str, Any]) -> list[Path]:
    """The point run folders of an in-process sweep, whose batches calibrate the simulator."""
    if record["kind"] != "load" or path is None:
        raise ConfigError(
            "a served sweep's points hold no batch service times: give service_runs "
            "(profiler runs at several batch sizes) with it"
        )
    return [Path(path) / p["run"] for p in record["points"]]


def sweep_record(value: str | os.PathLike | dict[str, Any]) -> dict[str, Any]:
    """A sweep record from a sweep folder (read) or a record (as it is)."""
    return value if isinstance(value, dict) else read_sweep(value)
