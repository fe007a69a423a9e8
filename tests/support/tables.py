"""DataFrame views of trace analyses that only the tests read.

The package hands ``analyze`` and the figures numpy columns (the ``*_table``/``*_rows``
functions of :mod:`workbench.analysis`); these build the pandas table of one of them, so a
test can assert on it by column. They moved here from the analysis modules (issue 24):
nothing in the package, the notebooks or the scripts called them.
"""

from __future__ import annotations

import pandas as pd

from workbench.analysis.gpu_timeline import kernel_rows
from workbench.analysis.launches import call_table, cold_table, launch_join
from workbench.analysis.trace_report import OPERATOR_COLUMNS, operator_rows
from workbench.analysis.steps import step_table
from workbench.analysis.transfers import copy_frame, direction_rows
from workbench.trace import Trace, derived
from workbench.trace.columns import categorical, kinds, nullable, rows_frame


def top_kernels(trace: Trace, n: int | None = 10) -> pd.DataFrame:
    """Kernels grouped by name, largest total first (ties by name).

    Columns: name (str), count, total_ns, mean_ns (float), max_ns, share (of all
    kernel time, 0..1). ``n=None`` keeps every name.
    """
    dtypes = {"name": "str", "count": "int64", "total_ns": "int64", "mean_ns": float}
    return rows_frame(kernel_rows(trace, n), dtypes | {"max_ns": "int64", "share": float})


@derived
def gpu_work_with_launch(trace: Trace) -> pd.DataFrame:
    """GPU work rows with their launching runtime call (null where it is missing).

    Columns: kind, name, ts_ns, dur_ns, device, stream, correlation, bytes,
    ext_id, launch_name (NA without a call), launch_ts_ns, launch_dur_ns (Int64),
    launch_tid. Text columns are categoricals sharing the events table's
    categories (no string is copied: kernel names run to kilobytes).
    A correlation shared by several runtime calls joins to the first of them
    (:class:`~workbench.analysis.launches.LaunchJoin`). Computed once per trace.
    """
    join = launch_join(trace)
    work = join.work
    return pd.DataFrame(
        {
            "kind": kinds(work.kind),
            "name": categorical(work.name.codes, work.name),
            "ts_ns": work.ts_ns,
            "dur_ns": work.dur_ns,
            **{
                c: nullable(getattr(work, c))
                for c in ("device", "stream", "correlation", "bytes", "ext_id")
            },
            "launch_name": categorical(join.launch_name, join.runtime.name),
            "launch_ts_ns": nullable(join.launch_ts_ns),
            "launch_dur_ns": nullable(join.launch_dur_ns),
            "launch_tid": categorical(join.launch_tid, join.runtime.tid),
        }
    )


def launch_calls(trace: Trace) -> pd.DataFrame:
    """:func:`~workbench.analysis.launches.call_table` as a table (correlation and
    launch_delay_ns nullable Int64)."""
    with_na = ("correlation", "launch_delay_ns")
    return pd.DataFrame(
        {k: nullable(v) if k in with_na else v for k, v in call_table(trace).items()}
    )


def cold_start_calls(trace: Trace) -> pd.DataFrame:
    """:func:`~workbench.analysis.launches.cold_table` as a table: name (str), ts_ns, dur_ns,
    correlation (Int64), reason ("init" or "first launch"); sorted by start."""
    t = cold_table(trace)
    return pd.DataFrame(
        {
            "name": pd.array(t["name"], dtype="str"),
            "ts_ns": t["ts_ns"],
            "dur_ns": t["dur_ns"],
            "correlation": nullable(t["correlation"]),
            "reason": pd.array(t["reason"], dtype="str"),
        }
    )


def top_operators(trace: Trace, n: int = 20, by_shapes: bool = True) -> pd.DataFrame:
    """The ``n`` operators with the most self time (columns: ``OPERATOR_COLUMNS``)."""
    dtypes = dict(zip(OPERATOR_COLUMNS, ("str", "str", "int64", "int64", "int64", float)))
    return rows_frame(operator_rows(trace, n, by_shapes), dtypes)


def profiler_steps(trace: Trace) -> pd.DataFrame:
    """:func:`~workbench.analysis.steps.step_table` as a table: one row per ``ProfilerStep#N``."""
    return pd.DataFrame(step_table(trace))


def memcpy_by_direction(trace: Trace) -> pd.DataFrame:
    """Copies per direction. Columns: direction, count, total_ns, bytes (Int64, NA when
    no copy carries bytes), gb_per_s. HtoD, DtoH and DtoD are always present."""
    return copy_frame(direction_rows(trace), "direction")
