"""One trace model: the events table loaded once, and the tables derived from it computed
once, on first use, and shared by every analysis and figure.

Every trace analysis takes either an events table or a :class:`TraceModel`.
Given a table it wraps it in a fresh model (nothing shared between calls);
given a model it reads the model's cached tables, so ``analyze()`` joins GPU
work to its launch calls once instead of once per analysis (the join ran 11
times per report before). The cached tables are the analyses' own results
(``launch_pairs``, ``profiler_steps``...), so figures drawing them draw exactly
what the analyses return.

Cached tables are shared: callers must not modify them in place (analyses are
pure; with pandas' copy-on-write a column assigned on a shallow copy leaves the
cache alone).
"""
from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Union

import numpy as np
import pandas as pd

from ..trace import GPU_WORK_KINDS, HOST_KINDS, KIND_KERNEL, KIND_MEMCPY, KIND_RUNTIME, Trace


class TraceModel:
    """A loaded trace's events plus lazily computed, cached derived tables (all times int ns).

    Build one with :meth:`load` (a trace file), :meth:`of` (a :class:`~workbench.trace.Trace`,
    an events table or a model) or ``TraceModel(events)``.
    """

    def __init__(self, events: pd.DataFrame, path: Path | None = None, meta: dict | None = None):
        self.events = events
        self.path = path
        self.meta = meta or {}

    @classmethod
    def load(cls, path: str | os.PathLike, progress=None) -> TraceModel:
        """Read a trace file once (see :func:`workbench.trace.load_trace`)."""
        from ..trace import load_trace

        return cls.of(load_trace(path, progress=progress))

    @classmethod
    def of(cls, source: TraceModel | Trace | pd.DataFrame) -> TraceModel:
        """The model of ``source``: itself when already a model, else a new one."""
        if isinstance(source, TraceModel):
            return source
        if isinstance(source, Trace):
            return cls(source.events, source.path, source.meta)
        if isinstance(source, pd.DataFrame):
            return cls(source)
        raise TypeError(f"expected an events table, a Trace or a TraceModel, got {type(source).__name__}")

    @property
    def device_properties(self) -> list[dict]:
        """The trace's ``deviceProperties``; [] if absent."""
        props = self.meta.get("deviceProperties")
        return list(props) if isinstance(props, list) else []

    # --- row subsets of the events table -------------------------------------------------
    def _rows(self, mask: np.ndarray) -> pd.DataFrame:
        return self.events[mask]

    @cached_property
    def _kind_codes(self) -> np.ndarray:
        return self.events["kind"].cat.codes.to_numpy()

    def _kind_mask(self, kinds) -> np.ndarray:
        categories = list(self.events["kind"].cat.categories)
        codes = [categories.index(k) for k in kinds if k in categories]
        return np.isin(self._kind_codes, codes)

    @cached_property
    def host(self) -> pd.DataFrame:
        """Host rows (``HOST_KINDS``: operators, annotations, runtime calls, python)."""
        return self._rows(self._kind_mask(HOST_KINDS))

    @cached_property
    def gpu_work(self) -> pd.DataFrame:
        """GPU work rows: kernels, copies, memsets (``GPU_WORK_KINDS``)."""
        return self._rows(self._kind_mask(GPU_WORK_KINDS))

    @cached_property
    def kernels(self) -> pd.DataFrame:
        """Kernel rows."""
        return self._rows(self._kind_mask([KIND_KERNEL]))

    @cached_property
    def runtime(self) -> pd.DataFrame:
        """Runtime-category rows (``cuda_sync`` events are not runtime calls)."""
        return self._rows(self._kind_mask([KIND_RUNTIME]))

    # --- derived tables: each computed by its analysis module, once ----------------------
    @cached_property
    def gpu_work_with_launch(self) -> pd.DataFrame:
        """:func:`workbench.analysis.launches.gpu_work_with_launch`: the launch join."""
        from .launches import join_launches

        return join_launches(self)

    @cached_property
    def launched_work(self) -> pd.DataFrame:
        """GPU work whose launch call is in the trace (rows of the join with a launch)."""
        joined = self.gpu_work_with_launch
        return joined[joined["launch_ts_ns"].notna().to_numpy()]

    @cached_property
    def launch_pairs(self) -> pd.DataFrame:
        """:func:`workbench.analysis.launches.launch_pairs` with HTA's launch names."""
        from .launches import HTA_LAUNCH_NAMES, pairs_of

        return pairs_of(self, HTA_LAUNCH_NAMES)

    @cached_property
    def launch_calls(self) -> pd.DataFrame:
        """:func:`workbench.analysis.launches.launch_calls`."""
        from .launches import calls_of

        return calls_of(self)

    @cached_property
    def memcpy_events(self) -> pd.DataFrame:
        """:func:`workbench.analysis.transfers.memcpy_events`."""
        from .transfers import copies_of

        return copies_of(self._rows(self._kind_mask([KIND_MEMCPY])))

    @cached_property
    def profiler_steps(self) -> pd.DataFrame:
        """:func:`workbench.analysis.steps.profiler_steps`."""
        from .steps import steps_of

        return steps_of(self)

    @cached_property
    def step_boundaries(self) -> pd.DataFrame:
        """:func:`workbench.analysis.steps.step_boundaries`."""
        from .steps import boundaries_of

        return boundaries_of(self)

    @cached_property
    def stage_ranges(self) -> pd.DataFrame:
        """:func:`workbench.analysis.trace_stages.stage_ranges`."""
        from .trace_stages import ranges_of

        return ranges_of(self)

    @cached_property
    def trace_stage_summary(self) -> pd.DataFrame:
        """:func:`workbench.analysis.trace_stages.trace_stage_summary`."""
        from .trace_stages import summary_of

        return summary_of(self.stage_ranges)


Source = Union[pd.DataFrame, Trace, TraceModel]  # what every trace analysis accepts


def model_of(source: TraceModel | Trace | pd.DataFrame) -> TraceModel:
    """The :class:`TraceModel` of an events table, a Trace or a model (itself)."""
    return TraceModel.of(source)


def shared(table: pd.DataFrame) -> pd.DataFrame:
    """A cached table handed to a caller: a shallow copy (copy-on-write keeps the cache intact)."""
    return table.copy(deep=False)
