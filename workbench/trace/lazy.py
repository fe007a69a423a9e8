"""``pd``: pandas, imported on first attribute access.

The trace model computes on numpy columns; only the functions that hand a DataFrame to figures
and notebooks touch ``pd``, so ``analyze`` (numpy end to end) never imports pandas or pyarrow.
"""

from __future__ import annotations


class _LazyPandas:
    def __getattr__(self, name: str):
        import pandas  # 0.3-0.5 s with pyarrow: only for a DataFrame, never in analyze

        return getattr(pandas, name)


pd = _LazyPandas()
