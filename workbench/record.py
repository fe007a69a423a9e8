"""Run records: what one profiling (or load) run measured, as plain data.

A run is a folder::

    run.json          meta: kind, pipeline, stages, config, environment, timing policy
    requests.parquet  one row per request (warm-up rows flagged)
    stages.parquet    one row per request and stage that ran
    <worker>.<time_ns>.pt.trace.json.gz   the traced run, when there is one

``requests`` columns: ``request`` (int64, 0-based, warm-up first), ``warmup``
(bool), ``start_ns`` (int64, from the run's start), ``dur_ns`` (int64, host
end-to-end wall time), ``ok`` (bool), ``error_stage``, ``error_type``,
``error_message`` (str or null), ``batch_size`` (int64 items). Load runs add
``arrival_ns``, ``batch_wait_ns``, ``queue_wait_ns``, ``service_ns``, ``batch``.

``stages`` columns: ``request``, ``stage`` (str), ``stage_index`` (int64),
``start_ns``, ``dur_ns`` (host wall), ``device_dur_ns`` (Int64, CUDA-event
time; null on CPU).

Folders are written atomically: into a hidden sibling, then renamed, so an
interrupted write never leaves a folder that loads as complete.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import RunRecordError

FORMAT = "workbench.run"
VERSION = 1
META_FILE = "run.json"
REQUESTS_FILE = "requests.parquet"
STAGES_FILE = "stages.parquet"
TRACE_SUFFIX = ".pt.trace.json.gz"
SCRATCH_PREFIX = "workbench-trace-"  # the runner's temporary trace folders

REQUEST_COLUMNS = {
    "request": "int64", "warmup": "bool", "start_ns": "int64", "dur_ns": "int64", "ok": "bool",
    "error_stage": "object", "error_type": "object", "error_message": "object", "batch_size": "int64",
}
STAGE_COLUMNS = {
    "request": "int64", "stage": "object", "stage_index": "int64", "start_ns": "int64",
    "dur_ns": "int64", "device_dur_ns": "Int64",
}


@dataclass
class Run:
    """One measured run: ``meta`` (run.json), ``requests`` and ``stages`` tables, a trace file."""

    meta: dict[str, Any]
    requests: pd.DataFrame
    stages: pd.DataFrame
    trace_path: Path | None = None
    path: Path | None = field(default=None, compare=False)

    @property
    def config(self) -> dict[str, Any]:
        return self.meta.get("config", {})

    @property
    def stage_names(self) -> list[str]:
        return list(self.meta.get("stages", []))

    @property
    def kind(self) -> str:
        return self.meta.get("kind", "profile")

    @property
    def label(self) -> str:
        c = self.config
        return f"{self.meta.get('pipeline', '?')} {c.get('device', '?')} bs={c.get('batch_size', '?')} {c.get('precision', '?')}"

    def measured(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Requests and stage rows of the measured (non-warm-up) requests."""
        req = self.requests[~self.requests["warmup"]]
        return req, self.stages[self.stages["request"].isin(req["request"])]

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the run folder atomically and return its path."""
        return save_run(self, path, overwrite=overwrite)


def save_run(run: Run, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    dest = Path(path)
    if dest.exists() and not overwrite:
        raise RunRecordError(f"run folder {dest} already exists; pick another --out or remove it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        meta = dict(run.meta, format=FORMAT, version=VERSION)
        if run.trace_path is not None:
            shutil.copy2(run.trace_path, staging / Path(run.trace_path).name)
            meta["trace"] = dict(meta.get("trace") or {}, file=Path(run.trace_path).name)
        typed_table(run.requests, REQUEST_COLUMNS).to_parquet(staging / REQUESTS_FILE, index=False)
        typed_table(run.stages, STAGE_COLUMNS).to_parquet(staging / STAGES_FILE, index=False)
        # run.json last: a folder without it is never taken for a run.
        (staging / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
            dest.rename(old)
            staging.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    run.path = dest
    if run.trace_path is not None:
        _drop_scratch(Path(run.trace_path))
        run.trace_path = dest / Path(run.trace_path).name
    return dest


def _drop_scratch(trace: Path) -> None:
    """Remove the runner's scratch folder once its trace is saved (long sessions must not pile up files)."""
    if trace.parent.name.startswith(SCRATCH_PREFIX) and trace.parent.parent == Path(tempfile.gettempdir()):
        shutil.rmtree(trace.parent, ignore_errors=True)


def load_run(path: str | os.PathLike) -> Run:
    """Read a run folder written by :func:`save_run` (or by ``workbench profile``)."""
    root = Path(path)
    if not root.is_dir():
        raise RunRecordError(f"{root}: not a folder (expected a run folder with {META_FILE})")
    meta_file = root / META_FILE
    if not meta_file.is_file():
        raise RunRecordError(f"{root}: no {META_FILE}; not a workbench run, or an interrupted one")
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as exc:
        raise RunRecordError(f"{meta_file}: unreadable run.json: {exc}") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise RunRecordError(f"{meta_file}: not a workbench run (format is {meta.get('format') if isinstance(meta, dict) else None!r})")
    if meta.get("version", 0) > VERSION:
        raise RunRecordError(f"{root}: run format version {meta['version']} is newer than this workbench ({VERSION}); upgrade")
    requests = _read_table(root / REQUESTS_FILE, REQUEST_COLUMNS)
    stages = _read_table(root / STAGES_FILE, STAGE_COLUMNS)
    trace = (meta.get("trace") or {}).get("file")
    trace_path = root / trace if trace else None
    if trace_path is not None and not trace_path.is_file():
        raise RunRecordError(f"{root}: run.json names trace {trace!r} but the file is missing")
    return Run(meta=meta, requests=requests, stages=stages, trace_path=trace_path, path=root)


def _read_table(path: Path, columns: dict[str, str]) -> pd.DataFrame:
    if not path.is_file():
        raise RunRecordError(f"{path.parent}: missing {path.name}")
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a damaged file
        raise RunRecordError(f"{path}: unreadable Parquet: {exc}") from exc
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise RunRecordError(f"{path}: missing columns {missing}")
    return typed_table(df, columns)


def typed_table(df: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """A copy with the given columns coerced (nullable text as object with None); others kept."""
    out = df.copy()
    for col, dtype in columns.items():
        if col not in out.columns:
            out[col] = pd.Series([None] * len(out), dtype=dtype if dtype != "object" else "object")
        elif dtype == "object":
            out[col] = out[col].astype(object).where(out[col].notna(), None)
        else:
            out[col] = out[col].astype(dtype)
    return out
