"""Numpy columns to pandas columns, for what hands a DataFrame to figures and notebooks (``pd``:
pandas imported on first use, :mod:`workbench.trace.schema`)."""

from __future__ import annotations

import numpy as np

from . import schema
from .numbers import NA_INT
from .schema import pd


def categorical(codes: np.ndarray, text):
    """A pandas Categorical of ``codes`` (-1 = missing) with a :class:`~.columns.Text`'s labels."""
    return pd.Categorical.from_codes(
        codes, dtype=pd.CategoricalDtype(pd.Index(list(text.labels), dtype="str"))
    )


def kinds(codes: np.ndarray):
    """The ``kind`` column (int8 codes into KINDS) as the events table's categorical."""
    return pd.Categorical.from_codes(codes.astype(np.int64), dtype=schema.KIND_DTYPE)


def rows_frame(rows: list[dict], dtypes: dict):
    """Dict rows as a DataFrame: one column per key of ``dtypes``, of that dtype."""
    return pd.DataFrame({k: pd.array([r[k] for r in rows], dtype=t) for k, t in dtypes.items()})


def text_frame(table: dict[str, np.ndarray], text: str):
    """A DataFrame of numpy columns, the object column ``text`` as a str column."""
    return pd.DataFrame(
        {k: pd.Series(list(v), dtype=str) if k == text else v for k, v in table.items()}
    )


def nullable(values: np.ndarray):
    """An int64 column with :data:`NA_INT` for missing as a pandas Int64 array."""
    values = np.asarray(values, dtype=np.int64)
    return pd.arrays.IntegerArray(values.copy(), values == NA_INT)
