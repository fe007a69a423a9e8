"""The one trace model: a trace's events, file and metadata, and the tables derived from it.

Analyses define their tables with :func:`derived` (memoised on the trace, computed once on first
use), so ``trace`` never imports ``analysis``.
"""

from __future__ import annotations

import functools
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

import numpy as np

from .columns import Columns
from .schema import GPU_WORK_KINDS

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")


class Trace:
    """A loaded trace (all times int ns): ``events``, ``path``, ``meta`` and memoised derived tables.

    ``meta``: the trace's top-level fields as written plus ``schema`` ("kineto" or "2021"),
    ``platform`` ("cuda", "rocm" or "cpu"), ``event_count`` and ``complete_event_count``.
    ``Trace(events)`` wraps a table built in code; the loader gives ``Trace(columns=...)``, the
    pandas table built from the numpy columns on first use of ``events`` (``analyze`` never asks).
    """

    def __init__(
        self,
        events: pd.DataFrame | None = None,
        path: Path | None = None,
        meta: dict | None = None,
        *,
        columns: Columns | None = None,
    ):
        if (events is None) == (columns is None):
            raise TypeError("Trace needs an events table or columns (one of them)")
        if events is not None:
            self.__dict__["events"] = events
        if columns is not None:
            self.__dict__["columns"] = columns
        self.path = path
        self.meta = meta or {}
        self._memo: dict[Callable, object] = {}

    @cached_property
    def events(self) -> pd.DataFrame:
        """The pandas events table (:mod:`workbench.trace.schema`), built from the columns once."""
        return self.columns.to_frame()

    @cached_property
    def columns(self) -> Columns:
        """The events as numpy columns (:mod:`workbench.trace.columns`)."""
        return Columns.from_frame(self.events)

    @classmethod
    def of(cls, source) -> Trace:
        """A trace itself, or an events table wrapped in a new one (figures and notebooks)."""
        if isinstance(source, Trace):
            return source
        if _is_frame(source):
            return cls(source)
        raise TypeError(
            f"expected a workbench.trace.Trace or an events table, got {type(source).__name__}"
        )

    def __len__(self) -> int:
        return len(self.columns) if "columns" in self.__dict__ else len(self.events)

    def __bool__(self) -> bool:
        return True  # a trace is a trace even without rows (``loaded or load_trace(...)`` idioms)

    def __repr__(self) -> str:
        return f"Trace({self.path or 'built in code'}, {len(self):,} events)"

    @property
    def device_properties(self) -> list[dict]:
        """The trace's ``deviceProperties`` (every GPU the process saw); [] if absent."""
        props = self.meta.get("deviceProperties")
        return list(props) if isinstance(props, list) else []

    def derive(self, compute: Callable[[Trace], T]) -> T:
        """``compute(self)``, computed on the first call and memoised (see :func:`derived`)."""
        if compute not in self._memo:
            self._memo[compute] = compute(self)
        return self._memo[compute]

    def rows_of(self, kinds) -> Columns:
        """The numpy columns of the rows whose kind is in ``kinds`` (memoised per kind set)."""
        key = ("rows", tuple(kinds))
        if key not in self._memo:
            self._memo[key] = self.columns.take(np.flatnonzero(self.columns.of_kinds(kinds)))
        return self._memo[key]

    @cached_property
    def gpu_work(self) -> pd.DataFrame:
        """GPU work rows of the events table: kernels, copies, memsets (``GPU_WORK_KINDS``)."""
        return self.events[self.events["kind"].isin(GPU_WORK_KINDS).to_numpy()]


def derived(compute: Callable[[Trace], T]) -> Callable[[Trace], T]:
    """Decorate ``compute(trace)`` so it runs once per :class:`Trace`; later calls get the memo (a
    DataFrame as a shallow copy: a caller's new column never reaches it; never modify it in place)."""

    @functools.wraps(compute)
    def memoised(trace: Trace) -> T:
        value = trace.derive(compute)
        return value.copy(deep=False) if _is_frame(value) else value

    return memoised


def _is_frame(value) -> bool:
    """A pandas DataFrame? (Without importing pandas: none exists unless pandas was imported.)"""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.DataFrame)
