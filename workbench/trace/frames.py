"""pandas, imported on first use, and the conversions from numpy columns to pandas columns.

Trace analyses compute on numpy columns (:mod:`workbench.trace.columns`); the functions that
hand a table to figures and notebooks build a DataFrame at the end. ``pd`` here imports pandas
when first touched, so ``analyze`` (numpy end to end) never pays for it.
"""
from __future__ import annotations

import numpy as np

from .columns import Text
from .numbers import NA_INT


class _LazyPandas:
    def __getattr__(self, name: str):
        import pandas

        return getattr(pandas, name)


pd = _LazyPandas()


def categorical(codes: np.ndarray, text: Text):
    """A pandas Categorical of ``codes`` (-1 = missing) with the text column's labels as categories."""
    return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(pd.Index(list(text.labels), dtype="str")))


def kinds(codes: np.ndarray):
    """The ``kind`` column (int8 codes into KINDS) as the events table's categorical."""
    from .schema import KIND_DTYPE

    return pd.Categorical.from_codes(codes.astype(np.int64), dtype=KIND_DTYPE)


def nullable(values: np.ndarray):
    """An int64 column with :data:`NA_INT` for missing as a pandas Int64 array."""
    values = np.asarray(values, dtype=np.int64)
    return pd.arrays.IntegerArray(values.copy(), values == NA_INT)
