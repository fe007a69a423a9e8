"""The request, stage and unit tables of a run: their columns (the dicts below, docs/json.md
"Tables"), the one builder, the checks on load. Times are int64 ns from the run's start.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

REQUEST_COLUMNS = {
    "request": "int64",
    "warmup": "bool",
    "start_ns": "int64",
    "dur_ns": "int64",
    "ok": "bool",
    "error_stage": "object",
    "error_type": "object",
    "error_message": "object",
    "batch_size": "int64",
    "error_where": "object",
}
STAGE_COLUMNS = {
    "request": "int64",
    "stage": "object",
    "stage_index": "int64",
    "start_ns": "int64",
    "dur_ns": "int64",
    "device_dur_ns": "Int64",
}
UNIT_COLUMNS = {"request": "int64", "stage": "object", "unit": "int64", "at_ns": "int64"}
OPTIONAL_REQUEST_COLUMNS = ("error_where",)  # added in format 2; null in older runs
# a load run's requests add the batcher's columns (``workbench.batching.summary``)
LOAD_REQUEST_COLUMNS = {
    "arrival_ns": "int64",
    "batch_wait_ns": "int64",
    "queue_wait_ns": "int64",
    "service_ns": "int64",
    "batch": "int64",
}
# columns some runs add, checked when present: served and ingested requests, GC time in stages, attributes
OPTIONAL_TYPED_COLUMNS = {
    **LOAD_REQUEST_COLUMNS,
    "lag_ns": "int64",  # a scheduled run's send minus its due time (>= 0): inside ``dur_ns``
    "request_id": "object",
    "span_name": "object",
    "cache_hit": "float",
    "gc_ns": "Int64",
}
ATTRIBUTE_PREFIX = "attr."  # ``attr.<name>``: a stage's described attribute, a number or null
# the smallest value an integer column may hold (others: 0): ``batch`` is -1 for a request never dispatched
MINIMUM = {"batch": -1}
# A timestamp or id (never summed) stays below VALUE_LIMIT, so adding a duration fits int64; any other
# column (summed by the analyses) stays below SUM_LIMIT / rows, so its total cannot wrap.
VALUE_LIMIT = 2**62
SUM_LIMIT = 2**62
VALUE_COLUMNS = frozenset(
    {"request", "start_ns", "arrival_ns", "stage_index", "batch", "unit", "at_ns"}
)


class TableError(ValueError):
    """A table column is missing or of the wrong type; ``field`` names the column."""

    def __init__(self, field_name: str, problem: str):
        super().__init__(f"column {field_name!r} {problem}")
        self.field = field_name


def request_row(
    request: int, warmup: bool, start_ns: int, dur_ns: int, failure: Any, batch_size: int
) -> dict:
    """One ``requests`` row; ``failure`` is a ``StageFailure`` or None."""
    return {
        "request": request,
        "warmup": warmup,
        "start_ns": start_ns,
        "dur_ns": dur_ns,
        "ok": failure is None,
        "error_stage": failure and failure.stage,
        "error_type": failure and failure.error_type,
        "error_message": failure and failure.message,
        "batch_size": batch_size,
        "error_where": getattr(failure, "where", None),
    }


def stage_rows(
    request: int, timing: Any, names: Sequence[str], origin_ns: int, first_index: int = 0
) -> list[tuple]:
    """``stages`` rows of one ``RequestTiming``: one per stage that ran, times from ``origin_ns``."""
    rows = []
    for k, (s, e) in enumerate(zip(timing.stage_start_ns, timing.stage_end_ns)):
        dev = timing.device_ns[k] if timing.device_ns is not None else None
        rows.append((request, names[k], k + first_index, s - origin_ns, e - s, dev))
    return rows


def build_tables(
    req_rows: Iterable[dict], st_rows: Iterable[tuple], extra_columns: dict[str, str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The typed ``requests`` (sorted by request) and ``stages`` tables from rows."""
    columns = {**REQUEST_COLUMNS, **(extra_columns or {})}
    requests = pd.DataFrame(list(req_rows), columns=list(columns))
    requests = typed_table(requests, columns).sort_values(
        "request", ignore_index=True, kind="stable"
    )
    stages = typed_table(pd.DataFrame(list(st_rows), columns=list(STAGE_COLUMNS)), STAGE_COLUMNS)
    return requests, stages


def build_units(rows: Iterable[tuple]) -> pd.DataFrame:
    """The typed ``units`` table from ``(request, stage, unit, at_ns)`` rows."""
    return typed_table(pd.DataFrame(list(rows), columns=list(UNIT_COLUMNS)), UNIT_COLUMNS)


def typed_table(df: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """A shallow copy with the given columns coerced (nullable text as object with None): a changed
    column is replaced, never written into (a deep copy doubles a large table)."""
    out = df.copy(deep=False)
    for col, dtype in columns.items():
        if col not in out.columns:
            out[col] = pd.Series([None] * len(out), dtype=dtype, index=out.index)
        elif dtype == "object":
            out[col] = shared_text(out[col])
        else:
            out[col] = out[col].astype(dtype)
    return out


def shared_text(series: pd.Series) -> pd.Series:
    """A text column as Python objects, null as None. A column of pandas' ``str`` (one Arrow buffer) or
    a categorical becomes one shared string per distinct value (``astype(object)``: one per row)."""
    if series.dtype == object:
        missing = series.isna()
        return series.where(~missing, None) if missing.any() else series
    codes, distinct = pd.factorize(series)  # null: code -1, the None appended last
    values = np.append(np.asarray(distinct, dtype=object), None)[codes]
    return pd.Series(values, index=series.index, name=series.name, dtype=object)


def checked_table(
    df: pd.DataFrame, columns: dict[str, str], optional: Sequence[str] = (), rows: int | None = None
) -> pd.DataFrame:
    """``df`` typed as ``columns`` after checking each column holds that type (nothing coerced across
    kinds); :class:`TableError` if not. ``rows``: the whole table's rows when ``df`` is a batch."""
    rows = len(df) if rows is None else rows
    for col, dtype in columns.items():
        if col not in df.columns:
            if col in optional:
                continue
            raise TableError(col, "is missing")
        _check_column(col, df[col], dtype, rows)
    for col in df.columns:  # the columns some runs add: typed when present, never read unchecked
        if col in columns:
            continue
        dtype = OPTIONAL_TYPED_COLUMNS.get(col) or (
            "float" if str(col).startswith(ATTRIBUTE_PREFIX) else None
        )
        if dtype is not None:
            _check_column(col, df[col], dtype, rows)
    return typed_table(df, columns)


def _check_column(col: str, series: pd.Series, dtype: str, rows: int) -> None:
    kind = series.dtype.kind
    if dtype == "bool":
        ok = kind == "b" and not series.isna().any()
        want = "true/false (bool) with no nulls"
    elif dtype == "int64":
        ok = kind in "iu" and not series.isna().any()
        want = "integers (int64) with no nulls"
    elif dtype == "Int64":
        ok = kind in "iu" or series.isna().all() or (str(series.dtype) == "Int64")
        want = "integers or null (Int64)"
    elif dtype == "float":
        ok = kind in "fiu" and bool(np.isfinite(series.dropna().to_numpy(dtype="float64")).all())
        want = "finite numbers or null"
    else:
        ok = pd.api.types.infer_dtype(series, skipna=True) in ("string", "empty")
        want = "text or null"
    if not ok:
        raise TableError(col, f"must hold {want}, found {series.dtype}")
    if dtype in ("int64", "Int64") and series.notna().any():
        _check_range(col, series.dropna(), rows)


def _check_range(col: str, series: pd.Series, rows: int) -> None:
    """Integers from :data:`MINIMUM` (0) up to :data:`VALUE_LIMIT`, or ``SUM_LIMIT / rows`` if summed."""
    low = MINIMUM.get(col, 0)
    if col in VALUE_COLUMNS:
        high, why = VALUE_LIMIT, "beyond int64 once a duration is added"
    else:
        high, why = SUM_LIMIT // max(rows, 1), "its total would overflow int64"
    values = series.to_numpy()
    if values.dtype.kind == "u" and len(values) and values.max() > high:
        raise TableError(col, f"holds {int(values.max())}, above {high} ({why})")
    below = values < low
    if below.any():
        raise TableError(col, f"holds {int(values[below][0])}, below its minimum {low}")
    above = values > high
    if above.any():
        raise TableError(col, f"holds {int(values[above][0])}, above {high} ({why})")
