"""A corpus of corrupted run folders, built in code from one good run (issue 11's 77-case families and more).

Each :class:`Damage` changes a copy of a good run folder and says which file
and which field the error must name. Families: deleted files, truncated
files, wrong types in ``run.json`` (one case per field and bad value), an
older or newer format, wrong or missing table columns (a text ``warmup``
column among them), tables that disagree, a trace path that leaves the
folder, and odd file-system shapes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd


@dataclass(frozen=True)
class Damage:
    id: str
    apply: Callable[[Path], None]
    file: str  # the file name the error must name
    field: str | None  # the field or column it must name (None: the file alone says it)


def _edit_meta(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        meta = json.loads((root / "run.json").read_text())
        out = change(meta)
        (root / "run.json").write_text(json.dumps(meta if out is None else out))

    return apply


def _set(path: str, value) -> Callable[[dict], None]:
    keys = path.split(".")

    def change(meta: dict) -> None:
        node = meta
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return change


def _load_section(value) -> Callable[[dict], None]:
    """The profile run turned into a load run (format 4: only a load run has a load section) with ``value``."""

    def change(meta: dict) -> None:
        for key in (
            "trace",
            "quantization",
            "memory",
            "cold_start",
            "attributes",
            "stage_roles",
            "stacks",
        ):
            meta.pop(key, None)
        meta.update(kind="load", load=value)

    return change


def _drop(key: str) -> Callable[[dict], None]:
    def change(meta: dict) -> None:
        del meta[key]

    return change


def _raw_meta(text: str) -> Callable[[Path], None]:
    return lambda root: (root / "run.json").write_text(text)


def _truncate(name: str, fraction: float) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        data = (root / name).read_bytes()
        (root / name).write_bytes(data[: int(len(data) * fraction)])

    return apply


def _edit_table(
    name: str, change: Callable[[pd.DataFrame], pd.DataFrame | None]
) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        df = pd.read_parquet(root / name)
        out = change(df)
        (df if out is None else out).to_parquet(root / name, index=False)

    return apply


def _column(col: str, make: Callable[[pd.Series], object]) -> Callable[[pd.DataFrame], None]:
    def change(df: pd.DataFrame) -> None:
        df[col] = make(df[col])

    return change


def _nan_first(s: pd.Series) -> pd.Series:
    out = s.astype("float64")
    out.iloc[0] = float("nan")
    return out


META_TYPE_CASES = [  # (field, bad value)
    ("kind", 5),
    ("kind", "trace"),
    ("kind", None),
    ("pipeline", 5),
    ("pipeline", ["toy"]),
    ("stages", "parse"),
    ("stages", [1, 2]),
    ("stages", {"parse": 0}),
    ("stages", None),
    ("stages", ["parse", "parse"]),
    ("config", "cpu"),
    ("config", []),
    ("config", None),
    ("config.batch_size", "eight"),
    ("config.batch_size", 0),
    ("config.batch_size", -1),
    ("config.batch_size", 2.5),
    ("config.batch_size", True),
    ("config.batch_size", None),
    ("config.device", 0),
    ("config.device", None),
    ("config.precision", 32),
    ("config.options", "x"),
    ("config.threads", 0),
    ("config.threads", "2"),
    ("timing", "x"),
    ("timing", None),
    ("timing.warmup", "10"),
    ("timing.warmup", -1),
    ("timing.requests", 1.5),
    ("env", "x"),
    ("created", 5),
    ("description", 7),
    ("trace", "x.pt.trace.json.gz"),
    ("trace", 5),
    ("trace.file", 5),
    ("status", "done"),
    ("status", 5),
    ("load", "x"),
    ("noise", []),
    ("fingerprint", 3),
    ("simulation", "x"),
    ("pipeline_stages", "parse"),
    ("format", "other"),
    ("format", None),
    ("version", 5),
    ("version", 99),
    ("version", 0),
    ("version", "1"),
    ("version", None),
    ("version", 1.5),
    ("version", True),
]
TRACE_PATH_CASES = [
    "../../etc/passwd",
    "/etc/passwd",
    "sub/x.pt.trace.json.gz",
    "..",
    "run.json",
    "missing.pt.trace.json.gz",
    "requests.parquet",
]
REQUEST_TYPE_CASES = [  # (column, bad column maker)
    ("warmup", lambda s: s.astype(str)),
    ("ok", lambda s: s.astype(str)),
    ("request", _nan_first),
    ("dur_ns", lambda s: s.astype(str)),
    ("start_ns", lambda s: s.astype("float64") + 0.5),
    ("batch_size", lambda s: s.astype(str)),
    ("error_message", lambda s: pd.Series(range(len(s)))),
    ("warmup", lambda s: s.astype("int64")),
    ("ok", _nan_first),
]
STAGE_TYPE_CASES = [
    ("stage", lambda s: pd.Series(range(len(s)))),
    ("stage_index", lambda s: s.astype(str)),
    ("dur_ns", _nan_first),
    ("device_dur_ns", lambda s: pd.Series(["x"] * len(s))),
    ("request", lambda s: s.astype(str)),
    ("start_ns", lambda s: s.astype("float64") + 0.25),
]
REQUEST_COLUMNS_REQUIRED = [
    "request",
    "warmup",
    "start_ns",
    "dur_ns",
    "ok",
    "error_stage",
    "error_type",
    "error_message",
    "batch_size",
]
STAGE_COLUMNS_REQUIRED = ["request", "stage", "stage_index", "start_ns", "dur_ns", "device_dur_ns"]
TABLES = ("run.json", "requests.parquet", "stages.parquet")


def _symlink_trace(root: Path) -> None:
    trace = next(root.glob("*.pt.trace.json.gz"))
    trace.unlink()
    os.symlink("/etc/hostname", trace)


def _replace_with_folder(name: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        (root / name).unlink()
        (root / name).mkdir()

    return apply


def corpus() -> list[Damage]:
    """Every damaged-folder case (more than 77)."""
    cases = [Damage(f"deleted-{n}", lambda r, n=n: (r / n).unlink(), n, None) for n in TABLES]
    cases.append(
        Damage(
            "deleted-trace",
            lambda r: next(r.glob("*.pt.trace.json.gz")).unlink(),
            "run.json",
            "trace.file",
        )
    )
    for name in TABLES:
        for frac in (0.0, 0.1, 0.5, 0.9):
            cases.append(Damage(f"truncated-{name}-{frac}", _truncate(name, frac), name, None))
    for field, value in META_TYPE_CASES:
        cases.append(
            Damage(f"meta-{field}={value!r}", _edit_meta(_set(field, value)), "run.json", field)
        )
    for key in ("format", "version"):
        cases.append(Damage(f"meta-no-{key}", _edit_meta(_drop(key)), "run.json", key))
    for top in ("[]", '"x"', "null", "1"):
        cases.append(Damage(f"meta-top-{top}", _raw_meta(top), "run.json", None))
    for bad in TRACE_PATH_CASES:
        cases.append(
            Damage(
                f"trace-path-{bad}", _edit_meta(_set("trace.file", bad)), "run.json", "trace.file"
            )
        )
    cases.append(Damage("trace-symlink-out", _symlink_trace, "run.json", "trace.file"))
    for table, required in (
        ("requests.parquet", REQUEST_COLUMNS_REQUIRED),
        ("stages.parquet", STAGE_COLUMNS_REQUIRED),
    ):
        for col in required:
            cases.append(
                Damage(
                    f"{table}-no-{col}",
                    _edit_table(table, lambda df, c=col: df.drop(columns=[c])),
                    table,
                    col,
                )
            )
    for table, typed in (
        ("requests.parquet", REQUEST_TYPE_CASES),
        ("stages.parquet", STAGE_TYPE_CASES),
    ):
        for i, (col, make) in enumerate(typed):
            cases.append(
                Damage(
                    f"{table}-type-{col}-{i}", _edit_table(table, _column(col, make)), table, col
                )
            )
    cases += [
        Damage(
            "requests-duplicate-id",
            _edit_table("requests.parquet", lambda df: pd.concat([df, df.iloc[:1]])),
            "requests.parquet",
            "request",
        ),
        Damage(
            "stages-unknown-stage",
            _edit_table("stages.parquet", _column("stage", lambda s: s.replace("parse", "parze"))),
            "stages.parquet",
            "stage",
        ),
        Damage(
            "stages-orphan-request",
            _edit_table("stages.parquet", _column("request", lambda s: s + 1000)),
            "stages.parquet",
            "request",
        ),
        Damage(
            "requests-negative-dur",
            _edit_table("requests.parquet", _column("dur_ns", lambda s: -s)),
            "requests.parquet",
            "dur_ns",
        ),
        Damage(
            "stages-negative-dur",
            _edit_table("stages.parquet", _column("dur_ns", lambda s: -s)),
            "stages.parquet",
            "dur_ns",
        ),
        Damage("run.json-is-a-folder", _replace_with_folder("run.json"), "run.json", None),
        Damage(
            "requests-is-a-folder",
            _replace_with_folder("requests.parquet"),
            "requests.parquet",
            None,
        ),
        Damage(
            "run.json-not-utf8",
            lambda r: (r / "run.json").write_bytes(b'{"format": "\xff\xfe"}'),
            "run.json",
            None,
        ),
        Damage(
            "run.json-deep",
            lambda r: (r / "run.json").write_text("[" * 100_000 + "]" * 100_000),
            "run.json",
            None,
        ),
    ]
    return cases + issue_27_cases() + issue_35_cases()


def _link_out(name: str) -> Callable[[Path], None]:
    """``name`` replaced by a link to a copy outside the folder (another run's file, as the issue found)."""

    def apply(root: Path) -> None:
        outside = root.parent / f"other-{name}"
        (root / name).rename(outside)
        os.symlink(outside, root / name)

    return apply


def _fifo(name: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        (root / name).unlink()
        os.mkfifo(root / name)

    return apply


def _stage_times(factor: int) -> Callable[[pd.DataFrame], None]:
    return _column("dur_ns", lambda s: s * factor)


def issue_27_cases() -> list[Damage]:
    """Issue 27: hand-edited folders that crashed or printed NaN / negative time with exit 0."""
    return [
        Damage(
            "meta-noise.noisy='yes'",
            _edit_meta(_set("noise", {"noisy": "yes"})),
            "run.json",
            "noise.noisy",
        ),
        Damage("meta-load=[1]", _edit_meta(_load_section([1])), "run.json", "load"),
        Damage(
            "meta-load.late_requests=-1",
            _edit_meta(_load_section({"late_requests": -1})),
            "run.json",
            "load.late_requests",
        ),
        Damage(
            "meta-kind=load-without-its-section",
            _edit_meta(_load_section(None)),
            "run.json",
            "load",
        ),
        Damage(
            "meta-timing.max_duration_s=1e400",
            _raw_meta_edit('"timing": {', '"timing": {"max_duration_s": 1e400, '),
            "run.json",
            None,
        ),
        Damage(
            "meta-stage-listed-absent",
            _edit_meta(lambda m: m["stages"].append("ghost")),
            "stages.parquet",
            None,
        ),
        Damage(
            "stages-50x-the-request",
            _edit_table("stages.parquet", _stage_times(50)),
            "stages.parquet",
            None,
        ),
        Damage(
            "requests-dur-past-int64-sums",
            _edit_table("requests.parquet", _column("dur_ns", lambda s: s * 0 + 2**62)),
            "requests.parquet",
            "dur_ns",
        ),
        Damage(
            "requests.parquet-link-out", _link_out("requests.parquet"), "requests.parquet", None
        ),
        Damage("stages.parquet-link-out", _link_out("stages.parquet"), "stages.parquet", None),
        Damage("run.json-link-out", _link_out("run.json"), "run.json", None),
        Damage("stages.parquet-fifo", _fifo("stages.parquet"), "stages.parquet", None),
        Damage(
            "stages-gc_ns-text",
            _edit_table("stages.parquet", lambda df: df.__setitem__("gc_ns", "12")),
            "stages.parquet",
            "gc_ns",
        ),
        Damage(
            "requests-attr-infinite",
            _edit_table("requests.parquet", lambda df: df.__setitem__("attr.tokens", float("inf"))),
            "requests.parquet",
            "attr.tokens",
        ),
        Damage(
            "requests-request_id-number",
            _edit_table("requests.parquet", lambda df: df.__setitem__("request_id", 5)),
            "requests.parquet",
            "request_id",
        ),
    ]


def issue_35_cases() -> list[Damage]:
    """Issue 35: run.json fields left loosely typed crashed show and audit (exit 3) or were printed."""
    load = {"policy": {"max_batch_size": 4, "max_wait_ms": 5.0}}
    cases = [
        ("trace.failures", _set("trace.failures", [{}])),
        ("trace.failures", _set("trace.failures", [{"stage": "parse", "type": "E", "count": 1}])),
        ("stacks.headline", _set("stacks", {"headline": 5})),
        ("stacks.stages", _set("stacks", {"stages": {"parse": {"tree": [{"id": 0}]}}})),
        ("load.warmup_failures", _load_section(load | {"warmup_failures": [{}]})),
        (
            "load.policy.max_wait_ms",
            _load_section({"policy": {"max_batch_size": 4, "max_wait_ms": "x"}}),
        ),
        ("load.policy", _load_section({"policy": {"max_wait_ms": 5.0}})),
        ("load.arrivals.rate_rps", _load_section(load | {"arrivals": {"rate_rps": "fast"}})),
        ("load.batch_sizes", _load_section(load | {"batch_sizes": {"1": -3}})),
    ]
    return [
        Damage(f"meta-35-{field}-{i}", _edit_meta(change), "run.json", field)
        for i, (field, change) in enumerate(cases)
    ]


def _raw_meta_edit(old: str, new: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        text = (root / "run.json").read_text()
        assert old in text
        (root / "run.json").write_text(text.replace(old, new, 1))

    return apply
