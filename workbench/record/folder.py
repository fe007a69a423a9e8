"""Run folders on disk: the one writer (:func:`save_run`) and the one reader (:func:`load_run`).

Writes are atomic: the folder is built in a hidden sibling, ``run.json`` last,
then put in place. Over an existing run (``overwrite=True``) the two folders
are swapped with ``renameat2(RENAME_EXCHANGE)`` on Linux, so the old or the
new run is at the path at every instant; elsewhere (or on a file system
without it) the old run is renamed to ``.<name>.old-<pid>`` first, and
:func:`load_run` puts that leftover back if a crash came between the renames.

The reader checks everything it hands on: the format and version (migrating
version 1), each field's type, each table column's type, and that the trace
named in ``run.json`` is a plain file inside the run folder. Every problem is
one :class:`RunRecordError` naming the file and the field.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd

from ..errors import RunRecordError
from .meta import MetaError, RunMeta, check_version
from .run import Run
from .tables import (OPTIONAL_REQUEST_COLUMNS, REQUEST_COLUMNS, STAGE_COLUMNS, TableError, checked_table,
                     typed_table)

META_FILE = "run.json"
REQUESTS_FILE = "requests.parquet"
STAGES_FILE = "stages.parquet"
TRACE_NAME_SUFFIXES = (".json.gz", ".json")
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def save_run(run: Run, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write ``run`` as a run folder at ``path`` (profile, load and simulation runs alike)."""
    dest = Path(path)
    if dest.exists() and not overwrite:
        raise RunRecordError(f"run folder {dest} already exists; pick another --out or remove it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    trace_name = None
    try:
        meta = run.meta.to_dict()
        if run.trace_path is not None:
            trace_name = _trace_name(Path(run.trace_path))
            shutil.copy2(run.trace_path, staging / trace_name)
            meta["trace"] = dict(meta.get("trace") or {}, file=trace_name)
        elif isinstance(meta.get("trace"), dict) and "file" in meta["trace"]:  # closed or dropped: name no file
            meta["trace"] = {k: v for k, v in meta["trace"].items() if k != "file"}
        typed_table(run.requests, REQUEST_COLUMNS).to_parquet(staging / REQUESTS_FILE, index=False)
        typed_table(run.stages, STAGE_COLUMNS).to_parquet(staging / STAGES_FILE, index=False)
        # run.json last: a folder without it is never taken for a run.
        (staging / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
        _put_in_place(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    run.path = dest
    run.meta.trace = meta["trace"]
    run._release_scratch(dest / trace_name if trace_name else None)
    return dest


def _trace_name(trace: Path) -> str:
    """The trace's file name, refusing anything that is not a profiler trace file."""
    if not trace.is_file() or not trace.name.endswith(TRACE_NAME_SUFFIXES):
        raise RunRecordError(f"{trace}: a run's trace must be an existing .json or .json.gz file")
    return trace.name


def _put_in_place(staging: Path, dest: Path) -> None:
    """Move the finished staging folder to ``dest``, swapping atomically with an old run there."""
    if not dest.exists():
        staging.rename(dest)
        return
    if exchange(staging, dest):
        shutil.rmtree(staging, ignore_errors=True)  # staging now holds the old run
        return
    _two_renames(staging, dest)


def _two_renames(staging: Path, dest: Path) -> None:
    """Where exchange is missing: old run aside, new run in; a crash between leaves the old for :func:`recover`."""
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # glibc < 2.28, musl without it
        return False
    rc = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # the file system cannot exchange
        return False
    raise OSError(err, f"exchanging {a} and {b}: {os.strerror(err)}")


def recover(root: Path) -> bool:
    """Put back the old run left as ``.<name>.old-<pid>`` by a crash between two renames."""
    if root.exists() or not root.parent.is_dir():
        return False
    leftovers = sorted((p for p in root.parent.glob(f".{root.name}.old-*") if (p / META_FILE).is_file()),
                       key=lambda p: p.stat().st_mtime)
    if not leftovers:
        return False
    leftovers[-1].rename(root)
    return True


def load_run(path: str | os.PathLike) -> Run:
    """Read and check a run folder written by :func:`save_run` (any format version up to this one)."""
    root = Path(path)
    recover(root)
    if not root.is_dir():
        raise RunRecordError(f"{root}: not a folder (expected a run folder with {META_FILE})")
    meta_file = root / META_FILE
    if not meta_file.is_file():
        raise RunRecordError(f"{root}: no {META_FILE}; not a workbench run, or an interrupted one")
    meta = read_meta(meta_file)
    requests = _read_table(root / REQUESTS_FILE, REQUEST_COLUMNS, OPTIONAL_REQUEST_COLUMNS)
    stages = _read_table(root / STAGES_FILE, STAGE_COLUMNS)
    _check_consistent(root, meta, requests, stages)
    trace_path = _trace_path(root, meta)
    return Run(meta=meta, requests=requests, stages=stages, trace_path=trace_path, path=root)


def read_meta(meta_file: Path) -> RunMeta:
    """The checked :class:`RunMeta` of a ``run.json`` (migrated to the current version)."""
    try:
        data = json.loads(meta_file.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        raise RunRecordError(f"{meta_file}: unreadable run.json: {exc}") from exc
    try:
        if not isinstance(data, dict):
            raise MetaError("$", f"must be a JSON object, got {type(data).__name__}")
        return RunMeta.from_dict(check_version(data))
    except MetaError as exc:
        raise RunRecordError(f"{meta_file}: {exc}") from exc


def _read_table(path: Path, columns: dict[str, str], optional=()) -> pd.DataFrame:
    if not path.is_file():
        raise RunRecordError(f"{path.parent}: missing {path.name}")
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a damaged file
        raise RunRecordError(f"{path}: unreadable Parquet: {exc}") from exc
    try:
        return checked_table(df, columns, optional)
    except TableError as exc:
        raise RunRecordError(f"{path}: {exc}") from exc


def _check_consistent(root: Path, meta: RunMeta, requests: pd.DataFrame, stages: pd.DataFrame) -> None:
    """Tables that agree with each other and with run.json (what the analyses assume)."""
    if requests["request"].duplicated().any():
        raise RunRecordError(f"{root / REQUESTS_FILE}: column 'request' has duplicate ids")
    unknown = sorted(set(stages["stage"]) - set(meta.stages))
    if unknown:
        raise RunRecordError(f"{root / STAGES_FILE}: column 'stage' names {unknown[:3]}, not in run.json 'stages'")
    orphans = ~stages["request"].isin(requests["request"])
    if orphans.any():
        raise RunRecordError(f"{root / STAGES_FILE}: column 'request' has ids not in {REQUESTS_FILE}")
    for path, df in ((root / REQUESTS_FILE, requests), (root / STAGES_FILE, stages)):
        if (df["dur_ns"] < 0).any():
            raise RunRecordError(f"{path}: column 'dur_ns' has negative durations")


def _trace_path(root: Path, meta: RunMeta) -> Path | None:
    """The trace named by run.json, which must be a plain file directly inside the run folder."""
    name = (meta.trace or {}).get("file")
    if not name:
        return None
    where = f"{root / META_FILE}: field 'trace.file'"
    if Path(name).name != name or name == META_FILE or not name.endswith(TRACE_NAME_SUFFIXES):
        raise RunRecordError(f"{where} must be a .json or .json.gz file name inside the run folder, got {name!r}")
    trace = root / name
    if not trace.is_file():
        raise RunRecordError(f"{where} names {name!r} but the file is missing")
    if trace.resolve().parent != root.resolve():
        raise RunRecordError(f"{where} {name!r} points outside the run folder (a link)")
    return trace
