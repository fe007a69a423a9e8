"""Run folders on disk: the one writer (:func:`write_folder`) and the one reader (:func:`read_folder`).

Writes are atomic: built in a hidden sibling, ``run.json`` last, then swapped in with
``renameat2(RENAME_EXCHANGE)`` (elsewhere the old run goes aside first and :func:`recover` puts it
back after a crash). The reader checks everything it hands on (fields, column types and ranges,
tables against each other and ``run.json``, regular files inside the folder); every problem is
one :class:`RunRecordError` naming the file, the field and the value.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow
import pyarrow.parquet

from ..errors import RunRecordError, encodable
from ..files import MAX_JSON_BYTES, MAX_TABLE_BYTES, open_regular, read_capped
from .meta import MetaError, ProfileMeta, RunMeta, decode_meta
from .sections import TraceInfo
from .tables import (
    LOAD_REQUEST_COLUMNS,
    OPTIONAL_REQUEST_COLUMNS,
    REQUEST_COLUMNS,
    STAGE_COLUMNS,
    UNIT_COLUMNS,
    TableError,
    checked_table,
    shared_text,
    typed_table,
)

META_FILE = "run.json"
REQUESTS_FILE = "requests.parquet"
STAGES_FILE = "stages.parquet"
UNITS_FILE = "units.parquet"  # only a run with a streaming stage (timing.UnitClock) has one
TRACE_NAME_SUFFIXES = (".json.gz", ".json")
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
# Each column a block of its own, freed from Arrow as it is converted: the table is not held twice
ARROW_TO_PANDAS = {"split_blocks": True, "self_destruct": True}
READ_WHOLE_ROWS = 65_536  # a table of fewer rows is read in one go (see _frame)
_TEXT = (pyarrow.string(), pyarrow.large_string())  # Parquet text columns read as dictionaries
STAGE_SLACK_NS = 1_000  # stage times may exceed their request's by clock rounding, never by more


def write_folder(
    meta: RunMeta,
    requests: pd.DataFrame,
    stages: pd.DataFrame,
    trace_path: Path | None,
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    units: pd.DataFrame | None = None,
) -> tuple[Path, RunMeta, Path | None]:
    """Write a run folder at ``path``: ``(folder, meta as written, its trace or None)``."""
    dest = Path(path)
    if dest.exists() and not overwrite:
        raise RunRecordError(f"run folder {dest} already exists; pick another --out or remove it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    trace_name = None
    try:
        if trace_path is not None:
            trace_name = Path(trace_path).name
            if not Path(trace_path).is_file() or not trace_name.endswith(TRACE_NAME_SUFFIXES):
                raise RunRecordError(
                    f"{trace_path}: a run's trace must be an existing .json or .json.gz file"
                )
            shutil.copy2(trace_path, staging / trace_name)
        if trace_name or (isinstance(meta, ProfileMeta) and meta.trace and meta.trace.file):
            meta = meta.replace(  # a trace copied in, or one closed or dropped: no file
                trace=dataclasses.replace(meta.trace or TraceInfo(), file=trace_name)
            )
        typed_table(requests, REQUEST_COLUMNS).to_parquet(staging / REQUESTS_FILE, index=False)
        typed_table(stages, STAGE_COLUMNS).to_parquet(staging / STAGES_FILE, index=False)
        if units is not None:
            typed_table(units, UNIT_COLUMNS).to_parquet(staging / UNITS_FILE, index=False)
        # run.json last: a folder without it is never taken for a run.
        (staging / META_FILE).write_text(_meta_text(meta))
        if not dest.exists():  # in place, swapping atomically with an old run there
            staging.rename(dest)
        elif exchange(staging, dest):
            shutil.rmtree(staging, ignore_errors=True)  # staging now holds the old run
        else:
            _two_renames(staging, dest)
    except ValueError as exc:  # allow_nan: a NaN or infinity in a section a producer filled
        shutil.rmtree(staging, ignore_errors=True)
        raise RunRecordError(f"{dest / META_FILE}: not written: {exc}") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return dest, meta, (dest / trace_name if trace_name else None)


def write_meta(meta: RunMeta, folder: Path) -> None:
    """Replace the ``run.json`` of a written run folder with ``meta``, atomically."""
    try:
        text = _meta_text(meta)
    except ValueError as exc:
        raise RunRecordError(f"{folder / META_FILE}: not written: {exc}") from exc
    write_text_atomically(folder / META_FILE, text)


def _meta_text(meta: RunMeta) -> str:
    """run.json's text: strict JSON (a NaN or infinity is a ValueError) of text UTF-8 can hold."""
    return json.dumps(_encodable(meta.to_dict()), indent=2, sort_keys=True, allow_nan=False)


def _encodable(value):
    """``value`` with every text :func:`~workbench.errors.encodable` (a lone surrogate: unloadable)."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encodable(v) for v in value]
    return value


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it: a reader never sees half a
    file, and a failure (a full disk, a folder at ``path``) removes the temporary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a report is for sharing
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
    leftovers = sorted(
        (p for p in root.parent.glob(f".{root.name}.old-*") if (p / META_FILE).is_file()),
        key=lambda p: p.stat().st_mtime,
    )
    if not leftovers:
        return False
    leftovers[-1].rename(root)
    return True


def read_folder(
    path: str | os.PathLike,
) -> tuple[Path, RunMeta, pd.DataFrame, pd.DataFrame, Path | None, pd.DataFrame | None]:
    """Read and check a run folder: ``(folder, meta, requests, stages, trace path, units)``."""
    root = Path(path)
    recover(root)
    if not root.is_dir():
        raise RunRecordError(f"{root}: not a folder (expected a run folder with {META_FILE})")
    if not (root / META_FILE).exists():
        raise RunRecordError(f"{root}: no {META_FILE}; not a workbench run, or an interrupted one")
    meta = read_meta(inside(root, META_FILE))
    schemas = table_schemas(meta)
    requests = _read_table(inside(root, REQUESTS_FILE), *schemas[REQUESTS_FILE])
    stages = _read_table(inside(root, STAGES_FILE), *schemas[STAGES_FILE])
    check_consistent(root, meta, requests, stages)
    units = None  # only a run with a streaming stage has them
    if (root / UNITS_FILE).exists() or (root / UNITS_FILE).is_symlink():
        units = _read_table(inside(root, UNITS_FILE), UNIT_COLUMNS)
        _check_rows(root / UNITS_FILE, units, meta, requests)
    return root, meta, requests, stages, trace_path(root, meta), units


def table_schemas(meta: RunMeta) -> dict[str, tuple[dict[str, str], tuple[str, ...]]]:
    """Each table's ``(columns -> dtype, optional columns)`` for a run of ``meta``'s kind."""
    extra = LOAD_REQUEST_COLUMNS if meta.kind == "load" else {}
    return {
        REQUESTS_FILE: ({**REQUEST_COLUMNS, **extra}, OPTIONAL_REQUEST_COLUMNS),
        STAGES_FILE: (STAGE_COLUMNS, ()),
    }


def inside(root: Path, name: str) -> Path:
    """``root / name``, which must be in the run folder (no link out); its readers open it with
    :func:`open_table` or :func:`read_meta`, which refuse a FIFO, a device or a folder."""
    path = root / name
    try:
        path.stat()
    except FileNotFoundError:
        raise RunRecordError(f"{root}: missing {name}") from None
    except OSError as exc:  # a symbolic link loop, no permission
        raise RunRecordError(f"{path}: unreadable: {exc.strerror}") from None
    if path.resolve().parent != root.resolve():
        raise RunRecordError(
            f"{path}: a link to {path.resolve()}, outside the run folder; copy the file in instead"
        )
    return path


def read_meta(meta_file: Path) -> RunMeta:
    """The checked :class:`RunMeta` of a ``run.json`` (migrated to the current version)."""
    raw = read_capped(meta_file, MAX_JSON_BYTES, RunRecordError, "run.json")
    try:
        return decode_meta(raw)
    except MetaError as exc:
        raise RunRecordError(f"{meta_file}: {exc}") from exc


def open_table(path: Path):
    """A run table opened for Parquet readers: a regular file within :data:`MAX_TABLE_BYTES`."""
    return open_regular(path, RunRecordError, "run table", max_bytes=MAX_TABLE_BYTES)


def _read_table(path: Path, columns: dict[str, str], optional=()) -> pd.DataFrame:
    try:
        with open_table(path) as stream:
            schema = pyarrow.parquet.read_schema(stream)
            text = [f.name for f in schema if columns.get(f.name) == "object" and f.type in _TEXT]
            stream.seek(0)
            df = _frame(pyarrow.parquet.ParquetFile(stream, read_dictionary=text))
    except RunRecordError:
        raise
    except Exception as exc:  # pyarrow raises several unrelated types for a damaged file
        raise RunRecordError(f"{path}: unreadable Parquet: {str(exc)[:200]}") from exc
    try:
        return checked_table(df.assign(**{c: shared_text(df[c]) for c in text}), columns, optional)
    except TableError as exc:
        raise RunRecordError(f"{path}: {exc}") from exc
    finally:  # the Arrow buffers of the text columns, now Python objects (the pool keeps them)
        pyarrow.default_memory_pool().release_unused()


def _frame(parquet: pyarrow.parquet.ParquetFile) -> pd.DataFrame:
    """The table, one column at a time (at once, the peak is twice it) unless small or indexed."""
    schema = parquet.schema_arrow
    index = (schema.pandas_metadata or {}).get("index_columns", [])
    small = parquet.metadata.num_rows <= READ_WHOLE_ROWS
    if small or any(isinstance(name, str) for name in index):
        return parquet.read().to_pandas(**ARROW_TO_PANDAS)
    return pd.DataFrame(
        {name: parquet.read([name]).to_pandas(**ARROW_TO_PANDAS)[name] for name in schema.names},
        copy=False,
    )


def check_consistent(
    root: Path, meta: RunMeta, requests: pd.DataFrame, stages: pd.DataFrame
) -> None:
    """Tables that agree with each other and with run.json (what the analyses assume)."""
    dup = requests["request"].duplicated()
    if dup.any():
        raise RunRecordError(
            f"{root / REQUESTS_FILE}: column 'request' has duplicate id {int(requests['request'][dup].iloc[0])}"
        )
    present = _check_rows(root / STAGES_FILE, stages, meta, requests)
    # each stage run.json lists has rows where a measured request succeeded (it ran every stage)
    if meta.kind in ("profile", "load") and (requests["ok"] & ~requests["warmup"]).any():
        missing = [s for s in meta.stages if s not in present]
        if missing:
            raise RunRecordError(
                f"{root / STAGES_FILE}: stage {missing[0]!r} is listed in run.json 'stages' "
                "but has no rows, though measured requests succeeded"
            )
    # a request's stage times (host) add up to no more than its own time (ingested spans may overlap)
    if meta.kind != "ingested" and not stages.empty:
        summed = stages.groupby("request")["dur_ns"].sum()
        own = requests.set_index("request")["dur_ns"].reindex(summed.index)
        over = summed > own + STAGE_SLACK_NS
        if over.any():
            rid = int(summed.index[over.to_numpy()][0])
            raise RunRecordError(
                f"{root / STAGES_FILE}: request {rid}'s stages add up to {int(summed[rid])} ns, "
                f"more than the request's dur_ns {int(own[rid])} in {REQUESTS_FILE}"
            )


def _check_rows(path: Path, table: pd.DataFrame, meta: RunMeta, requests: pd.DataFrame) -> set:
    """The stage names of a table whose rows' stages and requests all are in run.json and requests."""
    present = set(table["stage"].unique())  # once: each unique() hashes every row's text
    unknown = sorted(present - set(meta.stages), key=repr)  # a null beside a name: no order
    if unknown:
        raise RunRecordError(
            f"{path}: column 'stage' names {unknown[:3]}, not in run.json 'stages'"
        )
    orphans = ~table["request"].isin(requests["request"])
    if orphans.any():
        rid = int(table["request"][orphans].iloc[0])
        raise RunRecordError(f"{path}: column 'request' has id {rid}, not in {REQUESTS_FILE}")
    return present


def trace_path(root: Path, meta: RunMeta) -> Path | None:
    """The trace named by run.json, which must be a plain file directly inside the run folder."""
    name = meta.trace.file if isinstance(meta, ProfileMeta) and meta.trace else None
    if not name:
        return None
    where = f"{root / META_FILE}: field 'trace.file'"
    if Path(name).name != name or name == META_FILE or not name.endswith(TRACE_NAME_SUFFIXES):
        raise RunRecordError(
            f"{where} must be a .json or .json.gz file name inside the run folder, got {name!r}"
        )
    trace = root / name
    if not trace.exists():
        raise RunRecordError(f"{where} names {name!r} but the file is missing")
    if trace.resolve().parent != root.resolve():
        raise RunRecordError(f"{where} {name!r} points outside the run folder (a link)")
    if not trace.is_file():
        raise RunRecordError(f"{where} {name!r} is not a regular file (a FIFO, device or folder)")
    return trace
