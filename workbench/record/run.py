"""``Run``: one measured run (meta, two tables, a trace file) that owns its scratch folder."""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import RunRecordError
from .folder import read_folder, write_folder, write_meta
from .meta import MetaError, RunMeta
from .sections import Config

SCRATCH_PREFIX = "workbench-trace-"  # the one prefix of the runner's temporary trace folders


def scratch_folder() -> Path:
    """A new temporary folder for a traced run (owned by the Run built from it)."""
    return Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))


@dataclass(frozen=True)
class SummaryFailure:
    """A summary of a measured run that raised (``what``: "the stack summary", "the budget"); the run is kept."""

    what: str
    error: Exception

    def __str__(self) -> str:
        detail = f"{type(self.error).__name__}: {self.error}".splitlines()[0]
        return f"{self.what} failed ({detail})"


def summarized(failures: list[SummaryFailure], what: str, fn: Callable, *args: Any) -> Any:
    """``fn(*args)``; when it raises, None, with a :class:`SummaryFailure` appended to ``failures``
    (measure, save, then explain: a bug in a summary costs a line naming it, never the measurement)."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - recorded and shown (the run's summary_failures), never lost
        failures.append(SummaryFailure(what, exc))
        return None


@dataclass(eq=False)
class Run:
    """One measured run: ``meta`` (a dict is decoded and checked like a file), ``requests`` and
    ``stages`` tables, a trace file; ``units``: a streaming stage's unit times, else None.

    A context manager (or :meth:`close`) drops an unsaved run's scratch trace.
    ``summary_failures``: the summaries of it that raised (:func:`summarized`; never saved).
    """

    meta: RunMeta
    requests: pd.DataFrame
    stages: pd.DataFrame
    trace_path: Path | None = None
    path: Path | None = field(default=None, compare=False)
    summary_failures: list[SummaryFailure] = field(default_factory=list, repr=False, compare=False)
    units: pd.DataFrame | None = field(default=None, repr=False)  # a streaming stage's unit times
    _finalizer: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.meta, RunMeta):
            try:
                self.meta = RunMeta.from_dict(self.meta)
            except MetaError as exc:
                raise RunRecordError(f"run meta: {exc}") from exc
        if self.trace_path is not None:
            self.trace_path = Path(self.trace_path)
            folder = self.trace_path.parent
            scratch = folder.name.startswith(SCRATCH_PREFIX)  # the runner's, in the temp folder
            if self.path is None and scratch and folder.parent == Path(tempfile.gettempdir()):
                self._finalizer = weakref.finalize(self, shutil.rmtree, str(folder), True)

    @property
    def scratch(self) -> Path | None:
        """The temporary folder this run owns (None once saved or closed)."""
        return self.trace_path.parent if self._owns_scratch else None

    @property
    def _owns_scratch(self) -> bool:
        return self._finalizer is not None and self._finalizer.alive

    def close(self) -> None:
        """Delete the scratch trace folder of an unsaved run (a saved run's files are never touched)."""
        if self._owns_scratch:
            self._finalizer()
            self.trace_path = None

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def config(self) -> Config:
        return self.meta.config

    @property
    def stage_names(self) -> list[str]:
        return list(self.meta.stages)

    @property
    def kind(self) -> str:
        return self.meta.kind

    @property
    def status(self) -> str:
        return self.meta.status

    @property
    def label(self) -> str:
        c = self.config
        return (
            f"{self.meta.pipeline or '?'} {c.device or '?'} bs={c.batch_size or '?'} "
            f"{c.precision or '?'}"
        )

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the run folder atomically and return its path."""
        return save_run(self, path, overwrite=overwrite)


def save_run(run: Run, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write ``run`` as a run folder at ``path`` (every kind of run alike); the run then lives there."""
    dest, meta, trace = write_folder(
        run.meta,
        run.requests,
        run.stages,
        run.trace_path,
        path,
        overwrite=overwrite,
        units=run.units,
    )
    run.path, run.meta = dest, meta
    run.close()  # the trace now lives in the run folder: the scratch copy goes
    run.trace_path = trace
    return dest


def save_meta(run: Run) -> None:
    """Rewrite the run.json of a saved run with its meta (a summary added after the save), atomically."""
    if run.path is None:
        raise RunRecordError("save_meta: the run has not been saved; call save_run first")
    write_meta(run.meta, run.path)


def load_run(path: str | os.PathLike) -> Run:
    """Read and check a run folder written by :func:`save_run` (any format version up to this one)."""
    root, meta, requests, stages, trace, units = read_folder(path)
    return Run(
        meta=meta, requests=requests, stages=stages, trace_path=trace, path=root, units=units
    )
